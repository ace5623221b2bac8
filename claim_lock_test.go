package pgqueue_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testlog"
)

// A claim on a queue with a backlog takes the queue's claim lock first
// (sql/claim_lock.sql): while
// another session holds the lock, the client's claim waits for it, seen
// in pg_locks; after a bounded wait it claims without the lock, so a
// holder that stalls never stops the queue, and the client says so.
func TestClaimLockHeldElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	holder, err := pool.Begin(ctx)
	must(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended('pgqueue:claim:' || $1 || ':' || $2, 0))",
		pgqueue.DefaultSchema, pgqueue.DefaultQueue)
	must(t, err)

	var logs testlog.Buffer
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(context.Context, *pgqueue.Job[noteArgs]) error { return nil }, nil))
	b := startClient(t, pool, ws, &pgqueue.Config{Logger: logs.Logger()})
	// A backlog: the first claim fills its room, so the next ones take
	// the claim lock.
	params := make([]pgqueue.EnqueueParams, 50)
	for i := range params {
		params[i] = pgqueue.EnqueueParams{Args: noteArgs{N: i}}
	}
	_, err = b.client.EnqueueMany(ctx, params)
	must(t, err)

	waitFor(t, "a claim waiting for the claim lock", func() bool {
		var waiting int
		must(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").Scan(&waiting))
		return waiting > 0
	})
	waitFor(t, "every job completed", func() bool { return countJobs(t, pool, "state = 'completed'") == len(params) })
	// Completed while the lock was still held: claimed without it.
	var one int
	must(t, holder.QueryRow(ctx, "SELECT 1").Scan(&one))
	if !strings.Contains(logs.String(), "claimed without it") {
		t.Fatalf("no warning about the claim lock; logged:\n%s", logs.String())
	}
}

// With a backlog of short jobs a producer claims ahead of its free
// workers (Config.ClaimAhead): claims grow beyond MaxWorkers, so that a
// process with few workers still claims in large batches.
func TestClaimsGrowBeyondMaxWorkersWithABacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	const jobs, maxWorkers = 5_000, 4
	params := make([]pgqueue.EnqueueParams, jobs)
	for i := range params {
		params[i] = pgqueue.EnqueueParams{Args: noteArgs{N: i}}
	}
	_, err := newClient(t, pool, nil).EnqueueMany(ctx, params)
	must(t, err)

	var largest atomic.Int64
	obs := &pgqueue.Observer{Claimed: func(_ string, n int) {
		for m := largest.Load(); int64(n) > m && !largest.CompareAndSwap(m, int64(n)); m = largest.Load() {
		}
	}}
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(context.Context, *pgqueue.Job[noteArgs]) error { return nil }, nil))
	startClient(t, pool, ws, &pgqueue.Config{Observer: obs,
		Queues: map[string]pgqueue.QueueConfig{pgqueue.DefaultQueue: {MaxWorkers: maxWorkers}}})
	waitFor(t, "all jobs completed", func() bool { return countJobs(t, pool, "state = 'completed'") == jobs })
	if l := largest.Load(); l <= 2*maxWorkers {
		t.Fatalf("largest claim took %d jobs with MaxWorkers %d and a backlog of %d short jobs: no claiming ahead", l, maxWorkers, jobs)
	}
}
