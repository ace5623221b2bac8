package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testlog"
)

// TestNew checks New's own refusals; the checks of the Config it is given
// are in config_test.go.
func TestNew(t *testing.T) {
	t.Parallel()

	t.Run("NilPool", func(t *testing.T) {
		t.Parallel()
		if _, err := pgqueue.New(nil, nil); !errors.Is(err, pgqueue.ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
	})
	t.Run("QueuesWithoutWorkers", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		_, err := pgqueue.New(pool, &pgqueue.Config{Queues: map[string]pgqueue.QueueConfig{"a": {MaxWorkers: 1}}})
		if !errors.Is(err, pgqueue.ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
	})
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
	c := newClient(t, pool, &pgqueue.Config{Workers: ws, Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 2}},
		FetchPollInterval: 50 * time.Millisecond, Logger: testlog.Discard()})
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
