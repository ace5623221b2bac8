package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// TestClaimsExactlyOnce runs 8 clients of 4 workers each on one queue and
// counts every claim with a trigger: each of 20,000 jobs must be claimed
// exactly once and completed.
func TestClaimsExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	_, err := pool.Exec(ctx, `
		CREATE TABLE claim_audit (job_id bigint NOT NULL, fence bigint NOT NULL);
		CREATE FUNCTION audit_claim() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO claim_audit VALUES (NEW.id, NEW.fence);
			RETURN NEW;
		END $$;
		CREATE TRIGGER audit_claim AFTER UPDATE OF state ON pgqueue.jobs
			FOR EACH ROW WHEN (NEW.state = 'running') EXECUTE FUNCTION audit_claim();`)
	must(t, err)

	jobs := 20_000
	if testing.Short() {
		jobs = 4_000
	}
	params := make([]pgqueue.EnqueueParams, jobs)
	for i := range params {
		params[i] = pgqueue.EnqueueParams{Args: noteArgs{N: i}, Opts: &pgqueue.InsertOpts{Priority: int16(i % 3)}}
	}
	_, err = newClient(t, pool, nil).EnqueueMany(ctx, params)
	must(t, err)

	var handled atomic.Int64
	for i := range 8 {
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			handled.Add(1)
			return nil
		}, nil))
		startClient(t, pool, ws, &pgqueue.Config{
			ID:     fmt.Sprintf("client-%d", i),
			Queues: map[string]pgqueue.QueueConfig{pgqueue.DefaultQueue: {MaxWorkers: 4}},
		})
	}
	deadline := time.Now().Add(3 * time.Minute)
	for countJobs(t, pool, "state = 'completed'") < jobs {
		if time.Now().After(deadline) {
			t.Fatal(errors.New("jobs not all completed in time"))
		}
		time.Sleep(100 * time.Millisecond)
	}

	var claims, distinct, fences int
	must(t, pool.QueryRow(ctx, "SELECT count(*), count(DISTINCT job_id), count(DISTINCT fence) FROM claim_audit").Scan(&claims, &distinct, &fences))
	if claims != jobs || distinct != jobs || fences != jobs {
		t.Fatalf("claims %d, distinct jobs %d, distinct fences %d; want %d each", claims, distinct, fences, jobs)
	}
	if h := handled.Load(); h != int64(jobs) {
		t.Fatalf("handler ran %d times, want %d", h, jobs)
	}
	if n := countJobs(t, pool, "attempt <> 1"); n != 0 {
		t.Fatalf("%d jobs with attempt other than 1", n)
	}
	var workers int
	must(t, pool.QueryRow(ctx, "SELECT count(DISTINCT worker_id) FROM pgqueue.jobs").Scan(&workers))
	t.Logf("%d jobs, %d claims, worked by %d clients", jobs, claims, workers)
}

// TestStopLosesNoJob stops clients with jobs in flight, both gracefully and
// past the deadline, and checks every job is either completed or back in
// line with its attempt unspent.
func TestStopLosesNoJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("GracefulStopLetsJobsFinish", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		started := make(chan struct{}, 4)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			started <- struct{}{}
			time.Sleep(300 * time.Millisecond)
			return nil
		}, nil))
		b := startClient(t, pool, ws, nil)
		for i := range 4 {
			_, err := b.client.Enqueue(ctx, noteArgs{N: i}, nil)
			must(t, err)
		}
		for range 4 {
			<-started
		}
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		must(t, b.client.Stop(stopCtx))
		if n := countJobs(t, pool, "state = 'completed'"); n != 4 {
			t.Fatalf("%d completed after graceful stop, want 4", n)
		}
	})

	t.Run("DeadlineHandsJobsBack", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		started := make(chan struct{}, 10)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			started <- struct{}{}
			<-ctx.Done()
			if !errors.Is(context.Cause(ctx), pgqueue.ErrStopping) {
				return fmt.Errorf("cause %v, want ErrStopping", context.Cause(ctx))
			}
			return ctx.Err()
		}, nil))
		b := startClient(t, pool, ws, nil)
		for i := range 10 {
			_, err := b.client.Enqueue(ctx, noteArgs{N: i}, nil)
			must(t, err)
		}
		for range 4 {
			<-started
		}
		stopCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if err := b.client.Stop(stopCtx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("stop: %v, want deadline exceeded", err)
		}
		if n := countJobs(t, pool, "state = 'available' AND attempt = 0 AND errors = '[]'"); n != 10 {
			t.Fatalf("%d jobs back in line untouched, want 10", n)
		}
		// A new client picks them all up.
		ws2 := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws2, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error { return nil }, nil))
		startClient(t, pool, ws2, nil)
		waitFor(t, "all jobs completed", func() bool { return countJobs(t, pool, "state = 'completed' AND attempt = 1") == 10 })
	})

	t.Run("StartTwiceAndStopUnstarted", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error { return nil }, nil))
		c := newClient(t, pool, &pgqueue.Config{Workers: ws, Queues: map[string]pgqueue.QueueConfig{"a": {MaxWorkers: 1}}})
		if err := c.Stop(ctx); !errors.Is(err, pgqueue.ErrNotStarted) {
			t.Fatalf("stop before start: %v", err)
		}
		must(t, c.Start(ctx))
		if err := c.Start(ctx); !errors.Is(err, pgqueue.ErrAlreadyStarted) {
			t.Fatalf("second start: %v", err)
		}
		must(t, c.Stop(ctx))
	})
}

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

// Cancelling Start's context cancels the running jobs with its cause and
// hands them back with their attempt unspent.
func TestStartContextCancelsRunningJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	cause := make(chan error, 1)
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}, nil))
	c := newClient(t, pool, &pgqueue.Config{Workers: ws, Queues: map[string]pgqueue.QueueConfig{pgqueue.DefaultQueue: {MaxWorkers: 2}},
		FetchPollInterval: 50 * time.Millisecond, Logger: discardLogger()})
	_, err := c.Enqueue(ctx, noteArgs{}, nil)
	must(t, err)
	startCtx, cancel := context.WithCancel(ctx)
	must(t, c.Start(startCtx))
	waitFor(t, "job running", func() bool { return countJobs(t, pool, "state = 'running'") == 1 })
	cancel()
	select {
	case err := <-cause:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cause %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("running job not cancelled with Start's context")
	}
	must(t, c.Stop(ctx))
	if n := countJobs(t, pool, "state = 'available' AND attempt = 0"); n != 1 {
		t.Fatalf("%d jobs back in line with attempt 0, want 1", n)
	}
}

// A job claimed ahead that waited in the client longer than a heartbeat
// interval (slow jobs held every worker) is handed back unrun, attempt
// unspent, instead of starting on a lease nobody renewed.
func TestJobWaitingPastHalfItsLeaseIsHandedBack(t *testing.T) {
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
		Queues: map[string]pgqueue.QueueConfig{pgqueue.DefaultQueue: {MaxWorkers: 4}}, Logger: discardLogger()})
	// Every claim's jobs look as if they had waited a second for a worker.
	pgqueue.SetClaimAged(c, time.Second)
	_, err := c.EnqueueMany(ctx, []pgqueue.EnqueueParams{{Args: noteArgs{N: 1}}, {Args: noteArgs{N: 2}}})
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
