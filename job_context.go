package pgqueue

import (
	"context"

	"github.com/pgqueue/pgqueue/internal/executor"
)

// ClientFromContext returns the client running the job whose context ctx
// is (or derives from), so a handler can enqueue follow-up jobs or call
// CompleteTx without a global. It returns nil outside a job's context.
func ClientFromContext(ctx context.Context) *Client {
	_, c := runningJob(ctx)
	return c
}

// runningJob returns the job whose context ctx is and the client running
// it (the executor's Owner), or nils outside a job's context.
func runningJob(ctx context.Context) (*executor.ActiveJob, *Client) {
	if j := executor.JobFromContext(ctx); j != nil {
		if c, ok := j.Owner().(*Client); ok {
			return j, c
		}
	}
	return nil, nil
}
