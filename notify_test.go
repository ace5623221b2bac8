package pgqueue_test

import (
	"context"
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
		res, err := other.EnqueueManyTx(ctx, tx, []pgqueue.EnqueueManyParams{{Args: noteArgs{}}, {Args: noteArgs{}}})
		must(t, err)
		must(t, tx.Commit(ctx))
		waitFor(t, "batch completed", func() bool { return countJobs(t, pool, "state = 'completed'") == 5+int(res.Enqueued) })
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
		skipInShortMode(t, "a scheduled job's wake-up reaching other clients")
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
		row, err := leader.Enqueue(ctx, noteArgs{}, &pgqueue.EnqueueOpts{RunAt: runAt})
		must(t, err)
		waitState(t, pool, row.ID, "completed")
	})
}

// TestNotifyChannel checks that a schema's channel name stays within
// PostgreSQL's 63-byte identifier limit, and distinct per schema.
func TestNotifyChannel(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("s", 63)
	for _, tc := range []struct {
		schema string
		want   string // "" for a hashed name
	}{
		{"pgqueue", "pgqueue_jobs"},
		{strings.Repeat("s", 58), strings.Repeat("s", 58) + "_jobs"},
		{strings.Repeat("s", 59), ""},
		{long, ""},
	} {
		got := pgqueue.NotifyChannel(tc.schema)
		if tc.want != "" && got != tc.want {
			t.Errorf("schema of %d bytes: channel %q, want %q", len(tc.schema), got, tc.want)
		}
		if len(got) > 63 || !strings.HasSuffix(got, "_jobs") || !strings.HasPrefix(got, tc.schema[:min(len(tc.schema), 49)]) {
			t.Errorf("schema of %d bytes: channel %q", len(tc.schema), got)
		}
	}
	// Long schemas that share the kept prefix still get channels of their
	// own.
	a, b := pgqueue.NotifyChannel(long[:62]+"a"), pgqueue.NotifyChannel(long[:62]+"b")
	if a == b {
		t.Fatalf("schemas differing past the prefix share channel %q", a)
	}
}
