package pgqueue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// Jobs of one claim handed over back to back while one executor is idle
// must each get an executor: with free slots none may wait until it is
// handed back (a third of the lease). A count of idle executors without
// reservation let every job of the batch count on the one idle executor.
func TestDispatchStartsAnExecutorPerJob(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "an executor for each job of a claim handed over back to back")
	pool := newPool(t)
	started := make(chan int, 16)
	release := make(chan struct{})
	workers := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
		if job.Args.N == 0 {
			return nil // the first job leaves an idle executor behind
		}
		started <- job.Args.N
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}, nil))
	b := startClient(t, pool, workers, &pgqueue.Config{
		Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 8}},
	})
	defer close(release)
	ctx := t.Context()
	first, err := b.client.Enqueue(ctx, noteArgs{N: 0}, nil)
	must(t, err)
	waitState(t, pool, first.ID, "completed")
	// One EnqueueMany: the jobs come in one claim, dispatched in a row.
	_, err = b.client.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
		{Args: noteArgs{N: 1}}, {Args: noteArgs{N: 2}}, {Args: noteArgs{N: 3}},
	})
	must(t, err)
	deadline := time.After(5 * time.Second) // far below the 10 s hand-back
	for got := 0; got < 3; got++ {
		select {
		case <-started:
		case <-deadline:
			t.Fatalf("%d of 3 jobs of one claim started with 7 free slots", got)
		}
	}
}

// Every job of a claim runs at once when there are workers for all: the
// executors, woken a few at a time, wake one another until each job has
// one. Each handler here waits for all the others to start, so a job left
// waiting in the queue behind a running one would never let any finish.
func TestDispatchRunsAClaimAtOnce(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "300 jobs of one claim started together")
	const n = 300
	pool := newPool(t)
	var started sync.WaitGroup
	started.Add(n)
	allStarted := make(chan struct{})
	go func() { started.Wait(); close(allStarted) }()
	workers := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
		started.Done()
		select {
		case <-allStarted:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}, nil))
	b := startClient(t, pool, workers, &pgqueue.Config{
		Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: n}},
	})
	_, err := b.client.EnqueueMany(t.Context(), noteParams(n))
	must(t, err)
	select {
	case <-allStarted:
	case <-time.After(10 * time.Second): // below the 10 s hand-back
		t.Fatalf("the %d jobs did not all start together with %d workers", n, n)
	}
}
