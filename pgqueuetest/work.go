package pgqueuetest

import (
	"context"
	"testing"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/workone"
)

// WorkResult is what became of a job that Work or WorkJob ran.
type WorkResult struct {
	// Result is what the written result did to the job: completed,
	// retried, discarded, snoozed, cancelled, or released (the context
	// ended while it ran).
	Result pgqueue.Outcome
	// Err is the error the job's work (the handler inside the client's
	// work middleware) returned: nil when it completed, a
	// *pgqueue.PanicError when it panicked, the JobSnooze or JobCancel
	// error as returned. Nil for a kind with no worker.
	Err error
	// Job is the job as read back after its result was written: its
	// state, attempt, errors, next run, output.
	Job *pgqueue.JobRow
}

// Work enqueues args with opts through client (its enqueue middleware
// too), then runs that job at once (see WorkJob). It fails the test if the
// job cannot be enqueued or run.
func Work(ctx context.Context, tb testing.TB, client *pgqueue.Client, args pgqueue.JobArgs, opts *pgqueue.EnqueueOpts) *WorkResult {
	tb.Helper()
	res, err := client.Enqueue(ctx, args, opts)
	if err != nil {
		tb.Fatalf("pgqueuetest: enqueue %s: %v", args.Kind(), err)
	}
	return WorkJob(ctx, tb, client, res.ID)
}

// WorkJob runs the scheduled or available job id now, whatever its queue
// or run time, on the test's goroutine, as a started client runs a job:
// it claims the job with a new fence and client's lease, decodes its args,
// calls the worker the client's Workers have for its kind inside the
// client's work middleware, with a job context (ClientFromContext,
// RecordOutput, CompleteTx work), asks the client's error handler about a
// failure and writes the result with the statement a client uses. It
// returns what became of the job. The client need not be started; no
// heartbeat renews the lease, so the job should end within
// Config.JobLease. It fails the test if the job cannot be claimed (not
// scheduled or available: pgqueue.ErrJobNotFound) or its result was not
// written.
func WorkJob(ctx context.Context, tb testing.TB, client *pgqueue.Client, id int64) *WorkResult {
	tb.Helper()
	result, workErr, err := workone.Run(ctx, client, id)
	if err != nil {
		tb.Fatalf("pgqueuetest: work job %d: %v", id, err)
	}
	job, err := client.JobGet(ctx, id)
	if err != nil {
		tb.Fatalf("pgqueuetest: read job %d back: %v", id, err)
	}
	return &WorkResult{Result: pgqueue.Outcome(result), Err: workErr, Job: job}
}
