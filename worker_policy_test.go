package pgqueue_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// TestWorkerRetryPolicy checks that a worker's own retry policy replaces
// the client's for its kind, and only for its kind.
func TestWorkerRetryPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	var workerAsked, clientAsked atomic.Int64
	fail := func(ctx context.Context, job *pgqueue.Job[noteArgs]) error { return errors.New("failed") }
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, fail, &pgqueue.WorkerOpts{
		RetryPolicy: pgqueue.RetryPolicyFunc(func(attempt int, err error) time.Duration {
			if attempt == 1 && err.Error() == "failed" {
				workerAsked.Add(1)
			}
			return 3 * time.Hour
		}),
	}))
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[emailArgs]) error {
		return errors.New("failed")
	}, nil))
	b := startClient(t, pool, ws, &pgqueue.Config{
		RetryPolicy: pgqueue.RetryPolicyFunc(func(int, error) time.Duration {
			clientAsked.Add(1)
			return time.Minute
		}),
	})
	own, err := b.client.Enqueue(ctx, noteArgs{}, nil)
	must(t, err)
	s := waitState(t, pool, own.ID, "scheduled")
	if d := time.Until(s.runAt); d < 170*time.Minute || workerAsked.Load() != 1 || clientAsked.Load() != 0 {
		t.Fatalf("run_at in %s; worker's policy asked %d times, client's %d: want the worker's 3h only",
			d, workerAsked.Load(), clientAsked.Load())
	}
	other, err := b.client.Enqueue(ctx, emailArgs{}, nil)
	must(t, err)
	s = waitState(t, pool, other.ID, "scheduled")
	if d := time.Until(s.runAt); d > 2*time.Minute || clientAsked.Load() != 1 {
		t.Fatalf("kind without a policy: run_at in %s, client's policy asked %d times", d, clientAsked.Load())
	}
}
