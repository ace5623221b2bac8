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
// claims gather freed slots (the default ClaimBatchDelay) or not; and
// claims grow beyond MaxWorkers.
func TestMaxWorkersBoundsHandlersWhenClaimingAhead(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "MaxWorkers bounding the handlers over 6,000 jobs claimed ahead")
	for _, delay := range []time.Duration{0, -1} {
		t.Run(fmt.Sprintf("ClaimBatchDelay=%v", delay), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := newPool(t)
			const jobs, maxWorkers = 6_000, 8
			params := noteParams(jobs)
			_, err := newClient(t, pool, nil).EnqueueMany(ctx, params)
			must(t, err)

			var running, most, handled, largestClaim atomic.Int64
			ws := pgqueue.NewWorkers()
			must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
				raiseTo(&most, running.Add(1))
				defer running.Add(-1)
				handled.Add(1)
				return nil
			}, nil))
			obs := &pgqueue.Observer{Claimed: func(_ string, n int) { raiseTo(&largestClaim, int64(n)) }}
			startClient(t, pool, ws, &pgqueue.Config{ClaimBatchDelay: delay, Observer: obs,
				Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: maxWorkers}}})
			waitFor(t, "all jobs completed", func() bool { return countJobs(t, pool, "state = 'completed'") == jobs })
			if m := most.Load(); m > maxWorkers {
				t.Fatalf("%d handlers ran at once, MaxWorkers is %d", m, maxWorkers)
			}
			// Claims are sized by the backlog (Config.ClaimAhead), not
			// capped at MaxWorkers: a process with few workers still
			// claims in large batches.
			if l := largestClaim.Load(); delay == 0 && l <= 2*maxWorkers {
				t.Fatalf("largest claim took %d jobs with MaxWorkers %d and a backlog of %d short jobs: no claiming ahead", l, maxWorkers, jobs)
			}
			if h := handled.Load(); h != jobs {
				t.Fatalf("handlers ran %d times, want %d", h, jobs)
			}
		})
	}
}

// raiseTo raises a to n if n is larger.
func raiseTo(a *atomic.Int64, n int64) {
	for m := a.Load(); n > m && !a.CompareAndSwap(m, n); m = a.Load() {
	}
}
