package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgqueue/pgqueue/internal/enqueue"
	"github.com/pgqueue/pgqueue/internal/executor"
	"github.com/pgqueue/pgqueue/internal/fence"
	"github.com/pgqueue/pgqueue/internal/jobsql"
)

// staleFenceCode is the SQLSTATE check_fence raises for a stale token.
const staleFenceCode = "PQF01"

// CheckFenceTx records token as the highest fence token seen for resource,
// inside tx, or returns ErrStaleFence when a higher token was already
// recorded. Do your write to resource in the same tx: the check holds a lock
// on resource's fence row until tx ends, so a stale holder can neither pass
// the check nor slip a write in after a newer holder's. Equal tokens pass,
// so one holder may write many times.
//
// The wait for that lock is bounded by Config.FenceLockTimeout (5 s by
// default): an earlier holder stalled inside its transaction, after its
// check and before its commit, holds the row, and past the bound
// CheckFenceTx returns ErrFenceBusy. Roll tx back then.
//
// A handler fences the writes it makes on its job's behalf in one call with
// Job.CheckFenceTx, which picks the resource and token. In SQL the same check is the function <schema>.check_fence(resource, token),
// which raises SQLSTATE PQF01.
func (c *Client) CheckFenceTx(ctx context.Context, tx pgx.Tx, resource string, token int64) error {
	if enqueue.IsNilValue(tx) {
		return fmt.Errorf("check fence %q: %w", resource, errNilTx)
	}
	if err := fence.Check(ctx, tx, c.q.CheckFence, resource, token, c.config.FenceLockTimeout); err != nil {
		if IsStaleFence(err) {
			return fmt.Errorf("check fence %q token %d: %w", resource, token, ErrStaleFence)
		}
		if fence.IsBusy(err) {
			return fmt.Errorf("check fence %q token %d: another transaction held the fence row for %s (FenceLockTimeout): %w (%w)", resource, token, c.config.FenceLockTimeout, ErrFenceBusy, err)
		}
		return dbError(fmt.Sprintf("check fence %q", resource), err)
	}
	return nil
}

// CheckFenceTx fences a write made on the job's behalf in tx, in one call:
// it records the job's token for the job's resource, or returns
// ErrStaleFence when a newer holder already recorded a higher one. Call it
// in tx before the write, from the job's handler, with the job's context
// (or one derived from it; ErrNoJobContext otherwise).
//
// Which token and resource: for a singleton job the lock's fence
// (LockFence) on SingletonResource(key), higher for every later holder of
// the key, this job's own re-runs included; for any other job the claim's
// fence (JobRow.Fence) on JobResource(id), higher for every later claim of
// the job (a rescue after a lost lease, a retry). So a handler that paused
// past its lease, or its lock, can never overwrite what the next holder
// wrote. It is Client.CheckFenceTx with those two filled in.
func (j *Job[T]) CheckFenceTx(ctx context.Context, tx pgx.Tx) error {
	c := ClientFromContext(ctx)
	if c == nil {
		return fmt.Errorf("pgqueue: check fence of job %d: %w", j.ID, ErrNoJobContext)
	}
	resource, token := JobResource(j.ID), j.Fence
	if j.SingletonKey != "" && j.LockFence != 0 {
		resource, token = SingletonResource(j.SingletonKey), j.LockFence
	}
	return c.CheckFenceTx(ctx, tx, resource, token)
}

// JobResource is the fence resource of the writes made on behalf of the
// job with this id (see Job.CheckFenceTx).
func JobResource(id int64) string { return "job:" + strconv.FormatInt(id, 10) }

// IsStaleFence reports whether err is, or wraps, a stale-token refusal:
// ErrStaleFence or the PQF01 error that <schema>.check_fence raises in your
// own SQL.
func IsStaleFence(err error) bool {
	if errors.Is(err, ErrStaleFence) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == staleFenceCode
}

// CompleteTx completes job inside tx, so the job's database effects and its
// completion commit together or not at all. It returns ErrJobLeaseLost when
// the job no longer carries job.Fence or is no longer running (another
// worker took it over): roll tx back then. Once tx commits, the worker
// that runs the job does not complete it again, whatever the handler
// returns.
//
// Call it from a handler with job.JobRow; tx may be on any connection to
// the same database.
func (c *Client) CompleteTx(ctx context.Context, tx pgx.Tx, job *JobRow) error {
	if job == nil {
		return fmt.Errorf("%w job args: nil job", ErrInvalid)
	}
	if enqueue.IsNilValue(tx) {
		return fmt.Errorf("complete job %d: %w", job.ID, errNilTx)
	}
	if err := jobsql.CompleteInTx(ctx, tx, c.q, job); err != nil {
		return err
	}
	if j := executor.JobFromContext(ctx); j != nil && j.Row().ID == job.ID && j.Row().Fence == job.Fence {
		// The handler's own job, also when pgqueuetest.WorkJob runs it on
		// a client that is not started.
		j.MarkCompletedInTx()
	} else if active := c.activeJobs(); active != nil {
		active.MarkCompletedInTx(job.ID, job.Fence)
	}
	return nil
}
