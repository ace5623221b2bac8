package pgqueue_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// Claims may run ahead of the free slots when jobs are short (the next
// batch is claimed while the current one finishes); handlers still never
// run more than MaxWorkers at a time, and every job runs once, whether
// claims gather freed slots (the default ClaimBatchDelay) or not.
func TestMaxWorkersBoundsHandlersWhenClaimingAhead(t *testing.T) {
	t.Parallel()
	for _, delay := range []time.Duration{0, -1} {
		t.Run(fmt.Sprintf("ClaimBatchDelay=%v", delay), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := newPool(t)
			const jobs, maxWorkers = 6_000, 8
			params := make([]pgqueue.EnqueueParams, jobs)
			for i := range params {
				params[i] = pgqueue.EnqueueParams{Args: noteArgs{N: i}}
			}
			_, err := newClient(t, pool, nil).EnqueueMany(ctx, params)
			must(t, err)

			var running, most, handled atomic.Int64
			ws := pgqueue.NewWorkers()
			must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
				n := running.Add(1)
				defer running.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				handled.Add(1)
				return nil
			}, nil))
			startClient(t, pool, ws, &pgqueue.Config{ClaimBatchDelay: delay,
				Queues: map[string]pgqueue.QueueConfig{pgqueue.DefaultQueue: {MaxWorkers: maxWorkers}}})
			waitFor(t, "all jobs completed", func() bool { return countJobs(t, pool, "state = 'completed'") == jobs })
			if m := most.Load(); m > maxWorkers {
				t.Fatalf("%d handlers ran at once, MaxWorkers is %d", m, maxWorkers)
			}
			if h := handled.Load(); h != jobs {
				t.Fatalf("handlers ran %d times, want %d", h, jobs)
			}
		})
	}
}
