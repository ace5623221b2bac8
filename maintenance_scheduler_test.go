package pgqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// TestScheduler checks that scheduled jobs run once due, not before.
func TestScheduler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ScheduledJobWaitsForRunAt", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a scheduled job waiting for its run_at")
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error { return nil }, nil))
		b := startClient(t, pool, ws, nil)
		var runAt time.Time
		must(t, pool.QueryRow(ctx, "SELECT now() + interval '1 second'").Scan(&runAt))
		row, err := b.client.Enqueue(ctx, noteArgs{}, &pgqueue.EnqueueOpts{RunAt: runAt})
		must(t, err)
		if row.State != pgqueue.StateScheduled {
			t.Fatalf("state %s", row.State)
		}
		s := waitState(t, pool, row.ID, "completed")
		if s.attempts.Before(runAt) {
			t.Fatalf("started at %s, before run_at %s", s.attempts, runAt)
		}
	})
}
