package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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
		skipInShortMode(t, "the rescuer retrying a job whose lease expired")
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		dead := claimAsDeadWorker(t, pool, row.ID)
		ws := pgqueue.NewWorkers()
		var fence atomic.Int64
		lateRefused := make(chan error, 1)
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			fence.Store(job.Fence)
			// The dead worker's late completion arrives while this worker
			// runs the job: the rescue's new fence alone refuses it.
			late := *job.JobRow
			late.Fence = dead
			took, err := pgqueue.Finish(ctx, c, &late, "complete", 0)
			if err == nil && took {
				err = errors.New("the dead worker's late completion landed")
			}
			lateRefused <- err
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
		must(t, <-lateRefused)
	})

	t.Run("DiscardsWhenAttemptsUsedUp", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, noteArgs{}, &pgqueue.EnqueueOpts{MaxAttempts: 1})
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
		rounds := rescueRounds(t, pool, c)
		rescuer := newClient(t, pool, &pgqueue.Config{RescueInterval: 50 * time.Millisecond})
		raced := make(chan struct{})
		var once atomic.Bool
		pgqueue.SetBeforeRescueWrite(rescuer, func(ids []int64) {
			rounds.seen()
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
		rounds.wait(t, 3) // the racing round's write, and two more rounds
		s := readJob(t, pool, row.ID)
		if s.state != "completed" || *s.fence != fence || len(s.errors) != 0 {
			t.Fatalf("state %s fence %d errors %q: rescue overwrote a completion", s.state, *s.fence, s.errors)
		}
	})
	// A job read as expired, then given a new fence (rescued and claimed
	// again by a worker that died too) before the write: the write, made
	// with the fence it read, must leave it; the next round rescues it.
	t.Run("RefencedBetweenReadAndWriteIsLeftToTheNextRound", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		claimAsDeadWorker(t, pool, row.ID)
		rounds := rescueRounds(t, pool, c)
		rescuer := newClient(t, pool, &pgqueue.Config{RescueInterval: 50 * time.Millisecond})
		var refenced atomic.Int64
		checked := make(chan string, 1)
		pgqueue.SetBeforeRescueWrite(rescuer, func(ids []int64) {
			n := rounds.seen()
			switch {
			case n == 1 && slices.Contains(ids, row.ID):
				refenced.Store(claimAsDeadWorker(t, pool, row.ID))
			case n == 2:
				// Round 1's write is over: the job must be as round 1
				// found it after the refence.
				s := readJob(t, pool, row.ID)
				if s.state != "running" || *s.fence != refenced.Load() || len(s.errors) != 0 {
					checked <- fmt.Sprintf("state %s fence %d (refenced %d) errors %q", s.state, *s.fence, refenced.Load(), s.errors)
				} else {
					checked <- ""
				}
			}
		})
		must(t, rescuer.Start(ctx))
		defer rescuer.Stop(ctx)
		select {
		case msg := <-checked:
			if msg != "" {
				t.Fatalf("the rescue wrote with the fence it read over a job given a new one since: %s", msg)
			}
		case <-time.After(30 * time.Second):
			rounds.release()
			t.Fatal("no second rescue round in 30s")
		}
		var s jobState
		waitFor(t, "the next round's rescue", func() bool { s = readJob(t, pool, row.ID); return s.state != "running" })
		if s.state == "completed" || len(s.errors) != 1 || *s.fence <= refenced.Load() {
			t.Fatalf("next round: errors %q fence %d (refenced %d)", s.errors, *s.fence, refenced.Load())
		}
	})
}

// sentinelRounds counts rescue rounds: a sentinel job, expired and row
// locked by an open transaction for the test's life, is read by every
// round and skipped by every write, so the before-write hook runs once a
// round whatever else there is.
type sentinelRounds struct {
	mu     sync.Mutex
	n      int
	change chan struct{}
	// release ends the sentinel's transaction: before failing, so that a
	// rescue blocked on its row (a broken rescue.sql) cannot hang Stop.
	release func()
}

func rescueRounds(t *testing.T, pool *pgxpool.Pool, c *pgqueue.Client) *sentinelRounds {
	t.Helper()
	ctx := context.Background()
	row, err := c.Enqueue(ctx, noteArgs{N: -1}, nil)
	must(t, err)
	claimAsDeadWorker(t, pool, row.ID)
	tx, err := pool.Begin(ctx)
	must(t, err)
	release := func() { _ = tx.Rollback(context.Background()) }
	t.Cleanup(release)
	_, err = tx.Exec(ctx, "SELECT 1 FROM pgqueue.jobs WHERE id = $1 FOR UPDATE", row.ID)
	must(t, err)
	return &sentinelRounds{change: make(chan struct{}), release: release}
}

// seen counts a round and returns its number, from 1.
func (r *sentinelRounds) seen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	close(r.change)
	r.change = make(chan struct{})
	return r.n
}

// wait waits until n rounds have begun.
func (r *sentinelRounds) wait(t *testing.T, n int) {
	t.Helper()
	for {
		r.mu.Lock()
		got, change := r.n, r.change
		r.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-change:
		case <-time.After(30 * time.Second):
			r.release()
			t.Fatalf("%d rescue rounds of %d in 30s", got, n)
		}
	}
}
