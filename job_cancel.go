package pgqueue

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// JobCancel cancels the job with this id and returns it as it is after the
// call.
//
// A scheduled or available job is cancelled at once. A running job is
// marked as cancel-requested (JobRow.CancelRequestedAt) and stays running
// under its holder's fence and lease; its holder is told on the schema's
// control channel and cancels the handler's context with cause
// ErrJobCancelled, within about a hundred milliseconds of the commit when
// notifications flow, or at its next heartbeat otherwise (Config.PollOnly,
// a lost notification). An error the handler then returns ends the job
// cancelled, never retried; a handler that returns nil completes it, since
// its work was done. If the holder is gone, the rescuer ends the job
// cancelled when its lease expires. A completed, discarded or cancelled
// job is returned unchanged. ErrJobNotFound when no job has the id.
//
// See docs/concepts/job-control.md, "Cancelling a job", for every race and its outcome.
func (c *Client) JobCancel(ctx context.Context, id int64) (*JobRow, error) {
	if err := ctxError(ctx, "cancel job"); err != nil {
		return nil, err
	}
	var job *JobRow
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		var err error
		job, err = c.JobCancelTx(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, dbError(fmt.Sprintf("cancel job %d", id), err)
	}
	return job, nil
}

// JobCancelTx is JobCancel inside the caller's transaction: the job is
// cancelled, and a running job's holder told, only when tx commits.
func (c *Client) JobCancelTx(ctx context.Context, tx pgx.Tx, id int64) (*JobRow, error) {
	job, err := scanCancelled(tx.QueryRow(ctx, c.q.JobCancel, id, c.control))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("cancel job %d: %w", id, ErrJobNotFound)
	}
	if err != nil {
		return nil, dbError(fmt.Sprintf("cancel job %d", id), err)
	}
	return job, nil
}

// scanCancelled reads a row of sql/job_cancel.sql: the columns of
// job_get.sql.
func scanCancelled(row pgx.Row) (*JobRow, error) {
	var s jobFullScanner
	return s.scan(row)
}

// JobCancelMany is JobCancel for the jobs of ids, in one statement:
// scheduled and available jobs are cancelled at once (Changed), running
// ones have their cancel requested and their holders told
// (CancelRequested), final ones are left as they were (Unchanged), and
// ids no job has are NotFound. Its transaction is its own: when
// PostgreSQL fails it to break a deadlock or a serialization conflict
// (nothing was written), it runs again, up to three times in all.
func (c *Client) JobCancelMany(ctx context.Context, ids []int64) (*JobManyResult, error) {
	if err := ctxError(ctx, "cancel jobs"); err != nil {
		return nil, err
	}
	return againIfRolledBack(func() (*JobManyResult, error) { return c.jobCancelMany(ctx, c.pool, ids) })
}

// JobCancelManyTx is JobCancelMany inside the caller's transaction: the
// jobs are cancelled, and running jobs' holders told, only when tx
// commits.
func (c *Client) JobCancelManyTx(ctx context.Context, tx pgx.Tx, ids []int64) (*JobManyResult, error) {
	if err := ctxError(ctx, "cancel jobs"); err != nil {
		return nil, err
	}
	return c.jobCancelMany(ctx, tx, ids)
}

func (c *Client) jobCancelMany(ctx context.Context, db rowQuerier, ids []int64) (*JobManyResult, error) {
	const op = "cancel jobs"
	rows, err := db.Query(ctx, c.q.JobCancelMany, ids, c.control)
	if err != nil {
		return nil, dbError(op, err)
	}
	outcomes, err := collectOutcomes(rows)
	if err != nil {
		return nil, dbError(op, err)
	}
	return sortOutcomesBy(ids, outcomes, func(res *JobManyResult, o string) *[]int64 {
		switch o {
		case "cancelled":
			return &res.Changed
		case "requested":
			return &res.CancelRequested
		default: // "unchanged:<state>": final already
			return &res.Unchanged
		}
	}), nil
}
