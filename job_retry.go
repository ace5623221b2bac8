package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// JobRetry makes the job with this id run again now, and returns it as it
// is after the call.
//
// A completed, discarded or cancelled job, or a scheduled one, becomes
// available at once (run_at now, finalized_at and cancel_requested_at
// cleared), and the workers of its queue are woken at commit; one that
// still waits for jobs it depends on becomes blocked instead, and the jobs
// its failure cancelled wait for it again (see EnqueueOpts.DependsOn). An
// available or blocked job is returned as it is. A running job is left alone, its holder's fence
// and lease untouched: ErrJobRunning (cancel it with JobCancel first). No
// job with the id: ErrJobNotFound.
//
// The job keeps its history: Errors keeps every entry, and Attempt keeps
// counting, so the next run is attempt Attempt+1 and an error then is
// recorded as such. When the attempts were used up (Attempt ≥ MaxAttempts,
// as for a job discarded after its last attempt), MaxAttempts is raised to
// Attempt+1: the job gets exactly one more try, and is discarded again if
// it fails. A job with attempts left keeps its MaxAttempts.
//
// A unique job whose key another job holds now (inserted after this one
// finished in a state outside its UniqueOpts.ByState) is not retried:
// ErrUniqueConflict, and nothing changes.
func (c *Client) JobRetry(ctx context.Context, id int64) (*JobRow, error) {
	if err := ctxError(ctx, "retry job"); err != nil {
		return nil, err
	}
	job, err := c.jobRetry(ctx, c.pool, id)
	if err != nil {
		return nil, err
	}
	c.wake(job.Queue)
	return job, nil
}

// JobRetryTx is JobRetry inside the caller's transaction: the job runs
// again, and its queue's workers are woken, only when tx commits. It runs
// in a savepoint, so ErrUniqueConflict leaves tx usable.
func (c *Client) JobRetryTx(ctx context.Context, tx pgx.Tx, id int64) (*JobRow, error) {
	if err := ctxError(ctx, "retry job"); err != nil {
		return nil, err
	}
	var job *JobRow
	err := inSavepoint(ctx, tx, func(sp pgx.Tx) (err error) {
		job, err = c.jobRetry(ctx, sp, id)
		return err
	})
	return job, err
}

// rowQuerier is what the control calls need of a pool or a transaction.
type rowQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func (c *Client) jobRetry(ctx context.Context, db rowQuerier, id int64) (*JobRow, error) {
	op := fmt.Sprintf("retry job %d", id)
	retried, job, err := queryFlaggedJob(ctx, db, c.q.JobRetry, id, c.channel)
	if err != nil {
		return nil, controlError(op, err)
	}
	switch {
	case job == nil:
		return nil, fmt.Errorf("pgqueue: %s: %w", op, ErrJobNotFound)
	case retried || job.State == StateAvailable || job.State == StateBlocked:
		return job, nil
	default:
		// Running when the update looked at it (it may have finished since).
		return nil, fmt.Errorf("pgqueue: %s: %w", op, ErrJobRunning)
	}
}

// JobManyResult says what JobRetryMany, JobDeleteMany or JobCancelMany
// did with each id it was given. Each list is in ascending order; an id
// given twice counts once.
type JobManyResult struct {
	// Changed holds the jobs retried (available now), deleted or
	// cancelled.
	Changed []int64
	// Unchanged holds the jobs JobRetryMany left as they were because they
	// were available already (or blocked, waiting for their parents), and those JobCancelMany left because they
	// had ended already (completed, discarded or cancelled). JobDeleteMany
	// leaves it empty.
	Unchanged []int64
	// Running holds the jobs JobRetryMany and JobDeleteMany skipped
	// because they were running: their holders' fences and leases were not
	// touched. JobCancelMany leaves it empty.
	Running []int64
	// CancelRequested holds the running jobs whose cancel JobCancelMany
	// requested, as JobCancel does for one: their holders are told and
	// end them cancelled. The other calls leave it empty.
	CancelRequested []int64
	// NotFound holds the ids no job has.
	NotFound []int64
}

// JobRetryMany is JobRetry for the jobs of ids, in one statement: it
// retries those it may, skips running ones, and says which was which. It
// fails as a whole, changing nothing, when one of the jobs would collide
// with another on its unique key (ErrUniqueConflict); retry those one by
// one with JobRetry to learn which. Like JobCancelMany, it runs again
// when PostgreSQL fails it to break a deadlock.
func (c *Client) JobRetryMany(ctx context.Context, ids []int64) (*JobManyResult, error) {
	if err := ctxError(ctx, "retry jobs"); err != nil {
		return nil, err
	}
	var queues map[string]bool
	res, err := againIfRolledBack(func() (res *JobManyResult, err error) {
		res, queues, err = c.jobRetryMany(ctx, c.pool, ids)
		return res, err
	})
	if err != nil {
		return nil, err
	}
	for q := range queues {
		c.wake(q)
	}
	return res, nil
}

// JobRetryManyTx is JobRetryMany inside the caller's transaction, in a
// savepoint as JobRetryTx.
func (c *Client) JobRetryManyTx(ctx context.Context, tx pgx.Tx, ids []int64) (*JobManyResult, error) {
	if err := ctxError(ctx, "retry jobs"); err != nil {
		return nil, err
	}
	var res *JobManyResult
	err := inSavepoint(ctx, tx, func(sp pgx.Tx) (err error) {
		res, _, err = c.jobRetryMany(ctx, sp, ids)
		return err
	})
	return res, err
}

func (c *Client) jobRetryMany(ctx context.Context, db rowQuerier, ids []int64) (*JobManyResult, map[string]bool, error) {
	const op = "retry jobs"
	rows, err := db.Query(ctx, c.q.JobRetryMany, ids, c.channel)
	if err != nil {
		return nil, nil, controlError(op, err)
	}
	var (
		id            int64
		queue, result string
	)
	outcomes := map[int64]string{}
	queues := map[string]bool{}
	_, err = pgx.ForEachRow(rows, []any{&id, &queue, &result}, func() error {
		if result == string(StateBlocked) {
			// Waiting for its parents, as an available job waits for a
			// worker: left as it is.
			result = string(StateAvailable)
		}
		outcomes[id] = result
		if result == "retried" {
			queues[queue] = true
		}
		return nil
	})
	if err != nil {
		return nil, nil, controlError(op, err)
	}
	return sortOutcomes(ids, outcomes, "retried", string(StateAvailable)), queues, nil
}

// sortOutcomes sorts ids into a JobManyResult by the outcome the statement
// returned for each: changed, unchanged, or another state (running when
// the statement looked); ids without an outcome have no job.
func sortOutcomes(ids []int64, outcomes map[int64]string, changed, unchanged string) *JobManyResult {
	return sortOutcomesBy(ids, outcomes, func(res *JobManyResult, o string) *[]int64 {
		switch o {
		case changed:
			return &res.Changed
		case unchanged:
			return &res.Unchanged
		default:
			return &res.Running
		}
	})
}

// sortOutcomesBy sorts ids, in ascending order and each once, into the
// list of res that pick names for its outcome; ids without an outcome
// have no job.
func sortOutcomesBy(ids []int64, outcomes map[int64]string, pick func(res *JobManyResult, outcome string) *[]int64) *JobManyResult {
	res := &JobManyResult{}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	for _, id := range slices.Compact(ids) {
		list := &res.NotFound
		if o, ok := outcomes[id]; ok {
			list = pick(res, o)
		}
		*list = append(*list, id)
	}
	return res
}

// collectOutcomes reads the (id, outcome) rows of a Job*Many statement.
func collectOutcomes(rows pgx.Rows) (map[int64]string, error) {
	var (
		id     int64
		result string
	)
	outcomes := map[int64]string{}
	_, err := pgx.ForEachRow(rows, []any{&id, &result}, func() error {
		outcomes[id] = result
		return nil
	})
	return outcomes, err
}

// queryFlaggedJob runs a statement returning at most one row: a boolean
// and the job columns. job is nil when it returns no row.
func queryFlaggedJob(ctx context.Context, db rowQuerier, query string, args ...any) (flag bool, job *JobRow, err error) {
	rows, err := db.Query(ctx, query, args...)
	if err != nil {
		return false, nil, err
	}
	defer rows.Close()
	var s jobFullScanner
	if rows.Next() {
		job, err = s.scan(rows, &flag)
		if err != nil {
			return false, nil, err
		}
	}
	rows.Close()
	return flag, job, rows.Err()
}

// inSavepoint runs f in a savepoint of tx, rolled back when f fails, so a
// failed statement (a unique conflict) does not abort the caller's
// transaction.
func inSavepoint(ctx context.Context, tx pgx.Tx, f func(sp pgx.Tx) error) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return dbError("savepoint", err)
	}
	if err := f(sp); err != nil {
		_ = sp.Rollback(ctx)
		return err
	}
	if err := sp.Commit(ctx); err != nil {
		return dbError("release savepoint", err)
	}
	return nil
}

// controlError translates the errors of the control statements: a
// collision on jobs_unique_idx becomes ErrUniqueConflict; anything else is
// wrapped as dbError does.
func controlError(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "jobs_unique_idx" {
		return fmt.Errorf("pgqueue: %s: %w (%s)", op, ErrUniqueConflict, pgErr.Message)
	}
	return dbError(op, err)
}
