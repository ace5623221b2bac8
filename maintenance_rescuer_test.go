package pgqueue_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// TestRescuer checks what becomes of a running job whose lease expired
// (its worker died): retried under a new fence, discarded once its
// attempts are used up, and left alone if its worker completed it first.
func TestRescuer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("RetriesExpiredJob", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		dead := claimAsDeadWorker(t, pool, row.ID)
		ws := pgqueue.NewWorkers()
		var fence atomic.Int64
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			fence.Store(job.Fence)
			return nil
		}, nil))
		startClient(t, pool, ws, &pgqueue.Config{RescueInterval: 100 * time.Millisecond})
		s := waitState(t, pool, row.ID, "completed")
		if s.attempt != 2 || len(s.errors) != 1 || !strings.Contains(s.errors[0], "lease expired (worker dead-worker)") {
			t.Fatalf("attempt %d errors %q", s.attempt, s.errors)
		}
		if fence.Load() <= dead {
			t.Fatalf("new claim fence %d not above the dead worker's %d", fence.Load(), dead)
		}
		// The dead worker's late completion is refused.
		tag, err := pool.Exec(ctx, "UPDATE pgqueue.jobs SET state = 'completed' WHERE id = $1 AND fence = $2 AND state = 'running'", row.ID, dead)
		must(t, err)
		if tag.RowsAffected() != 0 {
			t.Fatal("stale fence accepted")
		}
	})

	t.Run("DiscardsWhenAttemptsUsedUp", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, noteArgs{}, &pgqueue.InsertOpts{MaxAttempts: 1})
		must(t, err)
		claimAsDeadWorker(t, pool, row.ID)
		startClient(t, pool, pgqueue.NewWorkers(), &pgqueue.Config{RescueInterval: 100 * time.Millisecond})
		s := waitState(t, pool, row.ID, "discarded")
		if len(s.errors) != 1 || !strings.Contains(s.errors[0], "lease expired") {
			t.Fatalf("errors %q", s.errors)
		}
	})

	t.Run("RacingCompletionLeavesItCompleted", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		fence := claimAsDeadWorker(t, pool, row.ID)
		rescuer := newClient(t, pool, &pgqueue.Config{RescueInterval: 50 * time.Millisecond})
		raced := make(chan struct{})
		var once atomic.Bool
		pgqueue.SetBeforeRescueWrite(rescuer, func(ids []int64) {
			if !once.CompareAndSwap(false, true) {
				return
			}
			// The slow worker completes with its old fence after the
			// rescuer read the job as expired, before it writes.
			tag, err := pool.Exec(context.Background(), "UPDATE pgqueue.jobs SET state = 'completed', finalized_at = now(), lease_until = NULL WHERE id = $1 AND fence = $2 AND state = 'running'", row.ID, fence)
			if err != nil || tag.RowsAffected() != 1 {
				t.Errorf("completion in the race window: %v, %d rows", err, tag.RowsAffected())
			}
			close(raced)
		})
		must(t, rescuer.Start(ctx))
		defer rescuer.Stop(ctx)
		<-raced
		time.Sleep(300 * time.Millisecond) // further rescue rounds
		s := readJob(t, pool, row.ID)
		if s.state != "completed" || *s.fence != fence || len(s.errors) != 0 {
			t.Fatalf("state %s fence %d errors %q: rescue overwrote a completion", s.state, *s.fence, s.errors)
		}
	})
}
