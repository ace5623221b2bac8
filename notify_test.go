package pgqueue_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// TestWakeUp checks that workers whose poll interval is an hour still start
// jobs promptly: only notifications can wake them.
func TestWakeUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	noPoll := func(ws *pgqueue.Workers) *pgqueue.Config {
		return &pgqueue.Config{FetchPollInterval: time.Hour, Workers: ws}
	}
	okWorkers := func(t *testing.T) *pgqueue.Workers {
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error { return nil }, nil))
		return ws
	}

	t.Run("InsertFromAnotherClient", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := okWorkers(t)
		startClient(t, pool, ws, noPoll(ws))
		other := newClient(t, pool, nil)
		for i := range 5 {
			row, err := other.Enqueue(ctx, noteArgs{N: i}, nil)
			must(t, err)
			waitState(t, pool, row.ID, "completed")
		}
		tx, err := pool.Begin(ctx)
		must(t, err)
		n, err := other.EnqueueManyTx(ctx, tx, []pgqueue.EnqueueParams{{Args: noteArgs{}}, {Args: noteArgs{}}})
		must(t, err)
		must(t, tx.Commit(ctx))
		waitFor(t, "batch completed", func() bool { return countJobs(t, pool, "state = 'completed'") == 5+int(n) })
	})

	t.Run("ListenerReconnects", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := okWorkers(t)
		startClient(t, pool, ws, noPoll(ws))
		other := newClient(t, pool, nil)
		row, err := other.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		waitState(t, pool, row.ID, "completed")
		var killed int
		waitFor(t, "listener terminated", func() bool {
			must(t, pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND query ILIKE 'LISTEN%'`).Scan(&killed))
			return killed > 0
		})
		// Wait for the new LISTEN, then insert from the other client.
		waitFor(t, "listener back", func() bool {
			var n int
			must(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'`).Scan(&n))
			return n == 1
		})
		row, err = other.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		waitState(t, pool, row.ID, "completed")
	})

	t.Run("ScheduledJobReachesOtherClients", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		// The leader runs the scheduler and works no queue.
		leader := newClient(t, pool, &pgqueue.Config{SchedulerInterval: 100 * time.Millisecond})
		must(t, leader.Start(ctx))
		t.Cleanup(func() { _ = leader.Stop(ctx) })
		waitFor(t, "a leader", func() bool {
			var n int
			must(t, pool.QueryRow(ctx, "SELECT count(*) FROM pgqueue.leases WHERE expires_at > now()").Scan(&n))
			return n == 1
		})
		ws := okWorkers(t)
		startClient(t, pool, ws, noPoll(ws))
		var runAt time.Time
		must(t, pool.QueryRow(ctx, "SELECT now() + interval '500 milliseconds'").Scan(&runAt))
		row, err := leader.Enqueue(ctx, noteArgs{}, &pgqueue.InsertOpts{RunAt: runAt})
		must(t, err)
		waitState(t, pool, row.ID, "completed")
	})
}

// TestBatchedResults checks that one batch of results refuses the jobs
// whose claim was lost and writes the others.
func TestBatchedResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	auditUpdates(t, pool)
	var logs syncBuffer
	release := make(chan struct{})
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
		<-release
		if job.Args.N == 3 {
			// Taken over while running: its result must not land.
			if _, err := pool.Exec(ctx, "UPDATE pgqueue.jobs SET fence = nextval('pgqueue.fence_seq') WHERE id = $1", job.ID); err != nil {
				return err
			}
		}
		return nil
	}, nil))
	params := make([]pgqueue.EnqueueParams, 8)
	for i := range params {
		params[i] = pgqueue.EnqueueParams{Args: noteArgs{N: i}}
	}
	_, err := newClient(t, pool, nil).EnqueueMany(ctx, params)
	must(t, err)
	startClient(t, pool, ws, &pgqueue.Config{
		Queues:             map[string]pgqueue.QueueConfig{pgqueue.DefaultQueue: {MaxWorkers: 8}},
		CompleteBatchDelay: 200 * time.Millisecond,
		Logger:             slog.New(slog.NewTextHandler(&logs, nil)),
	})
	waitFor(t, "all running", func() bool { return countJobs(t, pool, "state = 'running'") == 8 })
	close(release)
	waitFor(t, "seven completed", func() bool { return countJobs(t, pool, "state = 'completed'") == 7 })
	time.Sleep(300 * time.Millisecond)
	if n := countJobs(t, pool, "state = 'running' AND args->>'n' = '3'"); n != 1 {
		t.Fatal("the taken-over job's stale result landed")
	}
	var statements int
	must(t, pool.QueryRow(ctx, "SELECT count(DISTINCT xmin::text) FROM pgqueue.jobs WHERE state = 'completed'").Scan(&statements))
	if statements != 1 {
		t.Fatalf("seven results written by %d transactions, want one batch", statements)
	}
	var id int64
	must(t, pool.QueryRow(ctx, "SELECT id FROM pgqueue.jobs WHERE args->>'n' = '3'").Scan(&id))
	if !strings.Contains(logs.String(), fmt.Sprintf("job=%d", id)) || !strings.Contains(logs.String(), "refused") {
		t.Fatalf("lost job %d not reported:\n%s", id, logs.String())
	}
}

func TestEnqueueManySmallBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	c := newClient(t, pool, nil)
	var past time.Time
	must(t, pool.QueryRow(ctx, "SELECT now() - interval '1 minute'").Scan(&past))
	n, err := c.EnqueueMany(ctx, []pgqueue.EnqueueParams{
		{Args: noteArgs{N: 1}, Opts: &pgqueue.InsertOpts{Queue: "a", Priority: 2, Tags: []string{"x", "y"}, Meta: map[string]any{"k": 1}, MaxAttempts: 3}},
		{Args: noteArgs{N: 2}, Opts: &pgqueue.InsertOpts{RunAt: time.Now().Add(time.Hour)}},
		{Args: noteArgs{N: 3}, Opts: &pgqueue.InsertOpts{RunAt: past, SingletonKey: "k"}},
	})
	must(t, err)
	if n != 3 {
		t.Fatalf("inserted %d", n)
	}
	if countJobs(t, pool, "queue = 'a' AND priority = 2 AND tags = '{x,y}' AND meta = '{\"k\": 1}' AND max_attempts = 3 AND state = 'available'") != 1 ||
		countJobs(t, pool, "args->>'n' = '2' AND state = 'scheduled'") != 1 ||
		countJobs(t, pool, "args->>'n' = '3' AND state = 'available' AND singleton_key = 'k'") != 1 {
		t.Fatal("small batch rows differ from what was asked")
	}
}
