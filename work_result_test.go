package pgqueue_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// TestWorkResult checks how JobSnooze and JobCancel, returned by a
// handler, end the attempt.
func TestWorkResult(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("SnoozeSpendsNoAttempt", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a snooze spending no attempt")
		pool := newPool(t)
		var runs atomic.Int32
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			if runs.Add(1) == 1 {
				return pgqueue.JobSnooze(200 * time.Millisecond)
			}
			return nil
		}, nil))
		b := startClient(t, pool, ws, nil)
		row, err := b.client.Enqueue(ctx, noteArgs{}, &pgqueue.EnqueueOpts{MaxAttempts: 1})
		must(t, err)
		s := waitState(t, pool, row.ID, "completed")
		if runs.Load() != 2 || s.attempt != 1 || len(s.errors) != 0 {
			t.Fatalf("runs %d attempt %d errors %q", runs.Load(), s.attempt, s.errors)
		}
	})

	t.Run("CancelEndsWithoutRetry", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a JobCancel result ending the job without a retry")
		pool := newPool(t)
		var runs atomic.Int32
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			runs.Add(1)
			return pgqueue.JobCancel(errors.New("customer gone"))
		}, nil))
		b := startClient(t, pool, ws, nil)
		row, err := b.client.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		s := waitState(t, pool, row.ID, "cancelled")
		// Stopped, the client runs nothing more: a retry would have run by
		// then, since a cancelled job is final and nothing makes it
		// available again.
		must(t, b.client.Stop(ctx))
		if n := countJobs(t, pool, "id = $1 AND state = 'cancelled' AND attempt = 1", row.ID); n != 1 {
			t.Fatalf("job not cancelled at attempt 1 after stop")
		}
		if runs.Load() != 1 || s.attempt != 1 || !slices.Equal(s.errors, []string{"customer gone"}) {
			t.Fatalf("runs %d attempt %d errors %q", runs.Load(), s.attempt, s.errors)
		}
	})
}
