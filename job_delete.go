package pgqueue

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// JobDelete deletes the job with this id, whatever its state unless it is
// running, and returns it as it was. A running job is left alone, its
// holder's fence and lease untouched: ErrJobRunning (cancel it with
// JobCancel first). No job with the id: ErrJobNotFound.
//
// A job claimed while JobDelete runs is not deleted: the statement waits
// for the claim to commit, sees the job running and reports
// ErrJobRunning.
func (c *Client) JobDelete(ctx context.Context, id int64) (*JobRow, error) {
	if err := ctxError(ctx, "delete job"); err != nil {
		return nil, err
	}
	return c.jobDelete(ctx, c.pool, id)
}

// JobDeleteTx is JobDelete inside the caller's transaction: the job is gone
// only when tx commits.
func (c *Client) JobDeleteTx(ctx context.Context, tx pgx.Tx, id int64) (*JobRow, error) {
	if err := ctxError(ctx, "delete job"); err != nil {
		return nil, err
	}
	return c.jobDelete(ctx, tx, id)
}

func (c *Client) jobDelete(ctx context.Context, db rowQuerier, id int64) (*JobRow, error) {
	op := fmt.Sprintf("delete job %d", id)
	deleted, job, err := queryFlaggedJob(ctx, db, c.q.JobDelete, id)
	if err != nil {
		return nil, dbError(op, err)
	}
	switch {
	case job == nil:
		return nil, fmt.Errorf("pgqueue: %s: %w", op, ErrJobNotFound)
	case deleted:
		return job, nil
	default:
		// Running when the delete looked at it (it may have finished since).
		return nil, fmt.Errorf("pgqueue: %s: %w", op, ErrJobRunning)
	}
}

// JobDeleteMany is JobDelete for the jobs of ids, in one statement: it
// deletes those that are not running, skips running ones, and says which
// was which (Changed: deleted). Like JobCancelMany, it runs again when
// PostgreSQL fails it to break a deadlock.
func (c *Client) JobDeleteMany(ctx context.Context, ids []int64) (*JobManyResult, error) {
	if err := ctxError(ctx, "delete jobs"); err != nil {
		return nil, err
	}
	return againIfRolledBack(func() (*JobManyResult, error) { return c.jobDeleteMany(ctx, c.pool, ids) })
}

// JobDeleteManyTx is JobDeleteMany inside the caller's transaction.
func (c *Client) JobDeleteManyTx(ctx context.Context, tx pgx.Tx, ids []int64) (*JobManyResult, error) {
	if err := ctxError(ctx, "delete jobs"); err != nil {
		return nil, err
	}
	return c.jobDeleteMany(ctx, tx, ids)
}

func (c *Client) jobDeleteMany(ctx context.Context, db rowQuerier, ids []int64) (*JobManyResult, error) {
	const op = "delete jobs"
	rows, err := db.Query(ctx, c.q.JobDeleteMany, ids)
	if err != nil {
		return nil, dbError(op, err)
	}
	outcomes, err := collectOutcomes(rows)
	if err != nil {
		return nil, dbError(op, err)
	}
	// "" never matches: a job kept by a delete was running.
	return sortOutcomes(ids, outcomes, "deleted", ""), nil
}
