package pgqueue_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testlog"
)

// TestExecutor checks what becomes of a claimed job once its handler
// returns, fails, panics, runs out of time, or is missing.
func TestExecutor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("CompletesJobWithFence", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		var seen atomic.Int64
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			if job.Args.N != 7 || job.Attempt != 1 || job.State != pgqueue.StateRunning {
				return fmt.Errorf("unexpected job %+v", job.JobRow)
			}
			seen.Store(job.Fence)
			return nil
		}, nil))
		b := startClient(t, pool, ws, nil)
		row, err := b.client.Enqueue(ctx, noteArgs{N: 7}, nil)
		must(t, err)
		s := waitState(t, pool, row.ID, "completed")
		if s.fence == nil || *s.fence != seen.Load() || seen.Load() == 0 {
			t.Fatalf("fence in row %v, handler saw %d", s.fence, seen.Load())
		}
	})

	t.Run("RetriesThenDiscardsKeepingEveryError", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			return fmt.Errorf("boom %d", job.Attempt)
		}, nil))
		b := startClient(t, pool, ws, nil)
		row, err := b.client.Enqueue(ctx, noteArgs{}, &pgqueue.EnqueueOpts{MaxAttempts: 3})
		must(t, err)
		s := waitState(t, pool, row.ID, "discarded")
		if s.attempt != 3 || !slices.Equal(s.errors, []string{"boom 1", "boom 2", "boom 3"}) {
			t.Fatalf("attempt %d errors %q", s.attempt, s.errors)
		}
	})

	t.Run("PanicIsRecordedWithStack", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			panic("handler exploded")
		}, nil))
		b := startClient(t, pool, ws, nil)
		row, err := b.client.Enqueue(ctx, noteArgs{}, &pgqueue.EnqueueOpts{MaxAttempts: 1})
		must(t, err)
		s := waitState(t, pool, row.ID, "discarded")
		if len(s.errors) != 1 || s.errors[0] != "panic: handler exploded" || !strings.Contains(s.traces[0], "runHandler") {
			t.Fatalf("errors %q traces %q", s.errors, s.traces)
		}
	})

	t.Run("UnknownKindWaitsWithoutSpendingAttempt", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error { return nil }, nil))
		b := startClient(t, pool, ws, &pgqueue.Config{UnknownKindDelay: time.Hour})
		row, err := b.client.Enqueue(ctx, emailArgs{}, &pgqueue.EnqueueOpts{MaxAttempts: 1})
		must(t, err)
		s := waitState(t, pool, row.ID, "scheduled")
		if s.attempt != 0 || len(s.errors) != 1 || !strings.Contains(s.errors[0], `no worker for job kind "email"`) {
			t.Fatalf("attempt %d errors %q", s.attempt, s.errors)
		}
	})

	t.Run("TimeoutCancelsHandler", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			<-ctx.Done()
			return ctx.Err()
		}, &pgqueue.WorkerOpts{Timeout: 100 * time.Millisecond}))
		b := startClient(t, pool, ws, nil)
		row, err := b.client.Enqueue(ctx, noteArgs{}, &pgqueue.EnqueueOpts{MaxAttempts: 1})
		must(t, err)
		s := waitState(t, pool, row.ID, "discarded")
		if !slices.Equal(s.errors, []string{context.DeadlineExceeded.Error()}) {
			t.Fatalf("errors %q", s.errors)
		}
	})
}

// A job claimed ahead that waited in the client longer than a heartbeat
// interval (slow jobs held every worker) is handed back unrun, attempt
// unspent, instead of starting on a lease nobody renewed.
func TestJobWaitingPastAHeartbeatIntervalIsHandedBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	var ran atomic.Int64
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
		ran.Add(1)
		return nil
	}, nil))
	c := newClient(t, pool, &pgqueue.Config{Workers: ws, JobLease: 2 * time.Second, FetchPollInterval: time.Hour,
		Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 4}}, Logger: testlog.Discard()})
	// Every claim's jobs look as if they had waited a second for a worker.
	pgqueue.SetClaimAged(c, time.Second)
	_, err := c.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{{Args: noteArgs{N: 1}}, {Args: noteArgs{N: 2}}})
	must(t, err)
	must(t, c.Start(ctx))
	// The claim happens at Start; the hand-back makes both available again.
	waitFor(t, "jobs claimed and handed back", func() bool {
		return countJobs(t, pool, "state = 'available' AND attempt = 0 AND fence IS NOT NULL") == 2
	})
	must(t, c.Stop(ctx))
	if n := ran.Load(); n != 0 {
		t.Fatalf("handler ran %d times for jobs whose claim had aged", n)
	}
}
