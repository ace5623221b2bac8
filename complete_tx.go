package pgqueue

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/enqueue"
	"github.com/pgqueue/pgqueue/internal/executor"
	"github.com/pgqueue/pgqueue/internal/jobsql"
)

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
