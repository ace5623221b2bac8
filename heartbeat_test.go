package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testlog"
)

// TestHeartbeat checks that heartbeats keep a running job's lease, and
// that a job whose claim is lost, or cannot be renewed in time, is
// cancelled with ErrJobLeaseLost.
func TestHeartbeat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("HeartbeatsKeepALongJob", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "heartbeats keeping a job that runs past its lease")
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			select {
			case <-time.After(5 * time.Second):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}, nil))
		// Two seconds of lease, renewed every 667 ms, for a five-second job.
		b := startClient(t, pool, ws, &pgqueue.Config{JobLease: 2 * time.Second, RescueInterval: 100 * time.Millisecond})
		row, err := b.client.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		s := waitState(t, pool, row.ID, "completed")
		if s.attempt != 1 || len(s.errors) != 0 {
			t.Fatalf("attempt %d errors %q: lease not kept", s.attempt, s.errors)
		}
	})

	// The client drops the result itself, never sending it: the log says
	// so, and only then is the row read. (The database's own refusal of a
	// stale result is TestStaleWriteRefusedByFence's.)
	t.Run("LostClaimCancelsHandlerAndDropsResult", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		var logs testlog.Buffer
		cause := make(chan error, 1)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return nil // a stale "success" that must not reach the row
		}, nil))
		// Debug: the drop is logged at debug level, the heartbeat warned.
		debugLog := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		b := startClient(t, pool, ws, &pgqueue.Config{JobLease: time.Second, Logger: debugLog})
		row, err := b.client.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		running := waitState(t, pool, row.ID, "running")
		// Another worker takes the job over: a new fence.
		_, err = pool.Exec(ctx, "UPDATE pgqueue.jobs SET fence = nextval('pgqueue.fence_seq') WHERE id = $1", row.ID)
		must(t, err)
		select {
		case err := <-cause:
			if !errors.Is(err, pgqueue.ErrJobLeaseLost) {
				t.Fatalf("cause %v, want ErrJobLeaseLost", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("handler not cancelled after its claim was taken")
		}
		dropped := fmt.Sprintf(`msg="pgqueue: job result dropped, lease lost" job=%d kind=note fence=%d`, row.ID, *running.fence)
		waitFor(t, "the result dropped", func() bool { return strings.Contains(logs.String(), dropped) })
		if s := readJob(t, pool, row.ID); s.state != "running" {
			t.Fatalf("stale worker's result reached the row: state %s", s.state)
		}
		if strings.Contains(logs.String(), "job result refused") {
			t.Fatalf("the lost job's result was sent anyway:\n%s", logs.String())
		}
	})

	t.Run("UnreachableDatabaseCancelsJobsAfterLease", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "jobs cancelled once an unreachable database lets their lease run out")
		pool := newPool(t)
		cause := make(chan error, 1)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return context.Cause(ctx)
		}, nil))
		c := newClient(t, pool, &pgqueue.Config{Workers: ws, JobLease: time.Second, Queues: map[string]pgqueue.QueueConfig{"default": {MaxWorkers: 1}}, FetchPollInterval: 50 * time.Millisecond, Logger: testlog.Discard()})
		_, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		must(t, c.Start(ctx))
		defer func() {
			stopCtx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_ = c.Stop(stopCtx)
		}()
		waitFor(t, "job running", func() bool { return countJobs(t, pool, "state = 'running'") == 1 })
		// Every heartbeat now fails as if the database were gone.
		pool.Close()
		select {
		case err := <-cause:
			if !errors.Is(err, pgqueue.ErrJobLeaseLost) {
				t.Fatalf("cause %v, want ErrJobLeaseLost", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("job not cancelled although no heartbeat could renew its lease")
		}
	})
}
