package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/internal/testlog"
)

// TestPruner checks retention: the maintenance leader deletes finished
// jobs once their state's retention has passed, in batches, and nothing
// else.
func TestPruner(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "the pruner: retentions, batches, locked rows, leadership, fences after pruning")
	ctx := context.Background()
	const day = 24 * time.Hour

	t.Run("DeletesFinalJobsPastTheDefaultRetentions", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		due := joinIDs(
			insertFinished(t, pool, "completed", 25*time.Hour, 2),
			insertFinished(t, pool, "cancelled", 8*day, 2),
			insertFinished(t, pool, "discarded", 8*day, 2),
		)
		kept := joinIDs(
			insertFinished(t, pool, "completed", 23*time.Hour, 2),
			insertFinished(t, pool, "completed", time.Minute, 2),
			insertFinished(t, pool, "cancelled", 6*day, 2),
			insertFinished(t, pool, "discarded", 6*day, 2),
			insertOpen(t, pool, 365*day),
		)
		startPruner(t, pool, &pgqueue.Config{PruneInterval: 50 * time.Millisecond})
		waitGone(t, pool, due)
		time.Sleep(300 * time.Millisecond) // more runs
		checkKept(t, pool, kept)
	})

	t.Run("EachStateHasItsOwnRetention", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		due := joinIDs(
			insertFinished(t, pool, "completed", 90*time.Minute, 1),
			insertFinished(t, pool, "completed", 150*time.Minute, 1),
			insertFinished(t, pool, "cancelled", 150*time.Minute, 1),
			insertFinished(t, pool, "discarded", 4*time.Hour, 1),
		)
		kept := joinIDs(
			insertFinished(t, pool, "completed", 30*time.Minute, 1),
			insertFinished(t, pool, "cancelled", 90*time.Minute, 1),
			insertFinished(t, pool, "discarded", 90*time.Minute, 1),
			insertFinished(t, pool, "discarded", 150*time.Minute, 1),
			insertOpen(t, pool, 4*time.Hour),
		)
		startPruner(t, pool, &pgqueue.Config{
			PruneInterval:         50 * time.Millisecond,
			CompletedJobRetention: time.Hour, CancelledJobRetention: 2 * time.Hour, DiscardedJobRetention: 3 * time.Hour,
		})
		waitGone(t, pool, due)
		time.Sleep(300 * time.Millisecond)
		checkKept(t, pool, kept)
	})

	t.Run("RetainForeverKeepsAState", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		due := insertFinished(t, pool, "cancelled", 2*time.Hour, 3)
		kept := joinIDs(
			insertFinished(t, pool, "completed", 10*365*day, 3),
			insertFinished(t, pool, "discarded", 10*365*day, 3),
		)
		startPruner(t, pool, &pgqueue.Config{
			PruneInterval:         50 * time.Millisecond,
			CompletedJobRetention: pgqueue.RetainForever, CancelledJobRetention: time.Hour, DiscardedJobRetention: pgqueue.RetainForever,
		})
		waitGone(t, pool, due)
		time.Sleep(300 * time.Millisecond)
		checkKept(t, pool, kept)
	})

	t.Run("DrainsABacklogInBatchesInOneRun", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		// Half the backlog finished at one instant (a batch completion
		// writes one finalized_at for all its rows), more rows than a
		// batch: a batch must not stop a run at a tie.
		_, err := pool.Exec(ctx, `
			INSERT INTO pgqueue.jobs (queue, kind, state, attempt, fence, created_at, attempted_at, finalized_at)
			SELECT 'default', 'note', 'completed', 1, nextval('pgqueue.fence_seq'), t, t, t
			FROM (SELECT CASE WHEN g <= 2750 THEN now() - interval '2 days'
			                  ELSE now() - interval '2 days' + g * interval '1 millisecond' END AS t
			      FROM generate_series(1, 5500) g) s`)
		must(t, err)
		_, err = pool.Exec(ctx, `
			CREATE TABLE job_deletes (job_id bigint, tx bigint);
			CREATE FUNCTION audit_delete() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				INSERT INTO job_deletes VALUES (OLD.id, txid_current());
				RETURN OLD;
			END $$;
			CREATE TRIGGER audit_delete AFTER DELETE ON pgqueue.jobs FOR EACH ROW EXECUTE FUNCTION audit_delete();`)
		must(t, err)
		var logs testlog.Buffer
		// An interval longer than the test: the run at the start of the
		// term must drain everything.
		startPruner(t, pool, &pgqueue.Config{PruneInterval: time.Hour, Logger: logs.Logger()})
		waitFor(t, "the backlog to be pruned", func() bool { return countJobs(t, pool, "true") == 0 })
		var deleted, txs, largest int
		must(t, pool.QueryRow(ctx, "SELECT count(*), count(DISTINCT tx) FROM job_deletes").Scan(&deleted, &txs))
		must(t, pool.QueryRow(ctx, "SELECT max(n) FROM (SELECT count(*) AS n FROM job_deletes GROUP BY tx) b").Scan(&largest))
		// 1,000 is pruneBatch: each batch is a transaction of its own.
		if deleted != 5500 || txs < 6 || largest > 1000 {
			t.Fatalf("%d rows deleted in %d transactions, the largest %d rows: want 5,500 in batches of at most 1,000", deleted, txs, largest)
		}
		waitFor(t, "the prune log", func() bool { return strings.Contains(logs.String(), "pruned finished jobs") })
		if lines := strings.Count(logs.String(), "pruned finished jobs"); lines != 1 || !strings.Contains(logs.String(), "jobs=5500") {
			t.Fatalf("want one log line for the run, with jobs=5500:\n%s", logs.String())
		}
	})

	t.Run("SkipsRowsLockedByOthers", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ids := insertFinished(t, pool, "completed", 2*day, 3)
		tx, err := pool.Begin(ctx)
		must(t, err)
		defer tx.Rollback(ctx)
		_, err = tx.Exec(ctx, "SELECT 1 FROM pgqueue.jobs WHERE id = $1 FOR UPDATE", ids[1])
		must(t, err)
		startPruner(t, pool, &pgqueue.Config{PruneInterval: 50 * time.Millisecond})
		waitGone(t, pool, []int64{ids[0], ids[2]})
		time.Sleep(300 * time.Millisecond) // more runs, none waiting
		if n := lockWaits(t, pool); n != 0 {
			t.Fatalf("%d statements wait for a lock", n)
		}
		checkKept(t, pool, []int64{ids[1]})
		must(t, tx.Rollback(ctx))
		waitGone(t, pool, ids[1:2])
	})

	t.Run("ClaimsWhilePruningLoseNoJobAndNeverWait", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		insertFinished(t, pool, "completed", 2*day, 30_000)
		auditUpdates(t, pool)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error { return nil }, nil))
		// Watch for any claim, prune, schedule or rescue statement (they
		// all skip locked rows) waiting on a row, transaction or table lock
		// while both run. Waits to extend the table are left out: any
		// insert or update may make them, and a delete never does. So is
		// the commit of a transaction that sent a NOTIFY (the scheduler's
		// and every enqueue's): PostgreSQL queues notifications under one
		// lock per cluster (an object lock on pg_database, object 0), and
		// such commits take turns on it whatever they touched. A loaded
		// machine showed the scheduler's commit waiting so behind eight
		// enqueues' NOTIFYs; that wait is not on jobs.
		watchCtx, stopWatch := context.WithCancel(ctx)
		// Each wait seen is kept with its lock, its statement and what it
		// waits behind, so that a failure says which.
		var waits []string
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			for watchCtx.Err() == nil {
				rows, err := pool.Query(watchCtx, `SELECT a.wait_event || ' lock, by: ' || left(a.query, 40) || ', behind: ' ||
					       coalesce((SELECT string_agg(b.backend_type || ' ' || b.state || ': ' || left(b.query, 60), '; ')
					                 FROM pg_stat_activity b WHERE b.pid = ANY (pg_blocking_pids(a.pid))), 'none')
					FROM pg_stat_activity a
					WHERE a.datname = current_database() AND a.wait_event_type = 'Lock' AND a.wait_event <> 'extend'
					  AND a.query LIKE '%SKIP LOCKED%'
					  AND NOT EXISTS (SELECT FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted
					                  AND l.locktype = 'object' AND l.classid = 'pg_database'::regclass AND l.objid = 0)`)
				if err == nil {
					var seen []string
					seen, err = pgx.CollectRows(rows, pgx.RowTo[string])
					waits = append(waits, seen...)
				}
				if err != nil && watchCtx.Err() == nil {
					t.Errorf("watch: %v", err)
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		c := startClient(t, pool, ws, &pgqueue.Config{
			Queues:        map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 8}},
			PruneInterval: 20 * time.Millisecond, CompletedJobRetention: time.Hour, Logger: testlog.Discard(),
		}).client
		const producers, each = 10, 100
		var wg sync.WaitGroup
		for p := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					if _, err := c.Enqueue(ctx, noteArgs{N: p*each + i}, nil); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		waitFor(t, "every job to complete and the backlog to go", func() bool {
			return countJobs(t, pool, "true") == producers*each && countJobs(t, pool, "state = 'completed'") == producers*each
		})
		stopWatch()
		<-watched
		var completions, jobs int
		must(t, pool.QueryRow(ctx, "SELECT count(*), count(DISTINCT job_id) FROM job_updates WHERE state = 'completed'").Scan(&completions, &jobs))
		if completions != producers*each || jobs != producers*each {
			t.Fatalf("%d completions of %d jobs, want %d of %d", completions, jobs, producers*each, producers*each)
		}
		if len(waits) != 0 {
			t.Fatalf("claim, prune, schedule or rescue statements were seen waiting on a lock %d times: %q", len(waits), waits)
		}
	})

	t.Run("FencesAfterPruningAreHigherThanAnyBefore", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, &pgqueue.Config{PruneInterval: 50 * time.Millisecond, CompletedJobRetention: time.Millisecond, Logger: testlog.Discard()})
		for i := range 50 {
			_, err := c.Enqueue(ctx, noteArgs{N: i}, nil)
			must(t, err)
		}
		claimed, err := pgqueue.Claim(ctx, c, pgqueue.QueueDefault, 50)
		must(t, err)
		if len(claimed) != 50 {
			t.Fatalf("claimed %d, want 50", len(claimed))
		}
		if n, err := pgqueue.Complete(ctx, c, claimed); err != nil || n != 50 {
			t.Fatalf("completed %d: %v", n, err)
		}
		var highFence, highID int64
		for _, j := range claimed {
			highFence, highID = max(highFence, j.Fence), max(highID, j.ID)
		}
		must(t, c.Start(ctx))
		t.Cleanup(func() { c.Stop(context.Background()) })
		waitFor(t, "the completed jobs to be pruned", func() bool { return countJobs(t, pool, "true") == 0 })

		row, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		again, err := pgqueue.Claim(ctx, c, pgqueue.QueueDefault, 1)
		must(t, err)
		if len(again) != 1 {
			t.Fatalf("claimed %d, want 1", len(again))
		}
		if again[0].Fence <= highFence || row.ID <= highID {
			t.Fatalf("after pruning: fence %d, id %d; before: fences up to %d, ids up to %d", again[0].Fence, row.ID, highFence, highID)
		}
	})

	t.Run("OnlyTheLeaderPrunes", func(t *testing.T) {
		t.Parallel()
		connString := pgtest.DB().NewDatabase(t)
		poolA, poolB := namedPool(t, connString, "client_a"), namedPool(t, connString, "client_b")
		_, err := poolA.Exec(ctx, `
			CREATE TABLE job_deletes (job_id bigint, client text);
			CREATE FUNCTION audit_delete() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				INSERT INTO job_deletes VALUES (OLD.id, current_setting('application_name'));
				RETURN OLD;
			END $$;
			CREATE TRIGGER audit_delete AFTER DELETE ON pgqueue.jobs FOR EACH ROW EXECUTE FUNCTION audit_delete();`)
		must(t, err)
		cfg := func() *pgqueue.Config { return &pgqueue.Config{PruneInterval: 50 * time.Millisecond} }
		a := startPruner(t, poolA, cfg())
		waitFor(t, "client a to lead", func() bool { return leader(t, poolA) == a.ID() })
		startPruner(t, poolB, cfg())
		waitGone(t, poolA, insertFinished(t, poolA, "completed", 2*day, 20))
		waitGone(t, poolA, insertFinished(t, poolA, "discarded", 8*day, 20))
		if got := deletesBy(t, poolA); got != "client_a:40" {
			t.Fatalf("deletes by client: %s, want all 40 by the leader, client_a", got)
		}

		// Once a stops, b takes over (its next campaign) and prunes.
		must(t, a.Stop(ctx))
		waitGone(t, poolA, insertFinished(t, poolA, "completed", 2*day, 10))
		if got := deletesBy(t, poolA); got != "client_a:40 client_b:10" {
			t.Fatalf("deletes by client: %s, want client_a:40 client_b:10", got)
		}
	})
}

// Keep completed jobs for an hour and discarded ones forever; cancelled
// jobs keep the default week. Whichever client of the schema leads the
// maintenance deletes them, so give every client the same retentions.
func ExampleConfig_retention() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://localhost/app")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	client, err := pgqueue.New(pool, &pgqueue.Config{
		CompletedJobRetention: time.Hour,
		DiscardedJobRetention: pgqueue.RetainForever,
		PruneInterval:         time.Minute,
	})
	if err != nil {
		panic(err)
	}
	// A started client campaigns for the maintenance even when it works no
	// queue, and prunes while it leads.
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)
}

// joinIDs joins lists of ids.
func joinIDs(lists ...[]int64) []int64 {
	var out []int64
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// insertFinished inserts n jobs in final state that finished age ago, as
// a worker would have left them, and returns their ids.
func insertFinished(t *testing.T, pool *pgxpool.Pool, state string, age time.Duration, n int) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		INSERT INTO pgqueue.jobs (queue, kind, state, attempt, fence, created_at, attempted_at, finalized_at)
		SELECT 'default', 'note', $1, 1, nextval('pgqueue.fence_seq'), t, t, t
		FROM (SELECT now() - $2::bigint * interval '1 microsecond' - g * interval '1 microsecond' AS t
		      FROM generate_series(1, $3) g) s
		RETURNING id`, state, age.Microseconds(), n)
	must(t, err)
	ids := collectIDs(t, rows)
	if len(ids) != n {
		t.Fatalf("inserted %d, want %d", len(ids), n)
	}
	return ids
}

// insertOpen inserts one scheduled, one available and one running job,
// all created age ago, none final, none that a client without queues would
// move: the scheduled one is due in an hour, the running one's lease runs
// for an hour.
func insertOpen(t *testing.T, pool *pgxpool.Pool, age time.Duration) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		INSERT INTO pgqueue.jobs (queue, kind, state, attempt, run_at, fence, lease_until, worker_id, created_at, attempted_at)
		SELECT 'default', 'note', s, CASE s WHEN 'running' THEN 1 ELSE 0 END,
		       CASE s WHEN 'scheduled' THEN now() + interval '1 hour' ELSE t END,
		       CASE s WHEN 'running' THEN nextval('pgqueue.fence_seq') END,
		       CASE s WHEN 'running' THEN now() + interval '1 hour' END,
		       CASE s WHEN 'running' THEN 'busy-worker' END,
		       t, CASE s WHEN 'running' THEN t END
		FROM (SELECT now() - $1::bigint * interval '1 microsecond' AS t) a,
		     unnest(ARRAY['scheduled', 'available', 'running']) s
		RETURNING id`, age.Microseconds())
	must(t, err)
	return collectIDs(t, rows)
}

func collectIDs(t *testing.T, rows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close()
}) []int64 {
	t.Helper()
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		must(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	must(t, rows.Err())
	return ids
}

// startPruner starts a client that works no queue, so it only enqueues
// and campaigns for the maintenance, and stops it when the test ends.
func startPruner(t *testing.T, pool *pgxpool.Pool, cfg *pgqueue.Config) *pgqueue.Client {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testlog.Discard()
	}
	c := newClient(t, pool, cfg)
	must(t, c.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Stop(ctx); err != nil && !errors.Is(err, pgqueue.ErrNotStarted) {
			t.Errorf("stop: %v", err)
		}
	})
	return c
}

// namedPool is a pool on connString whose sessions carry application_name
// name.
func namedPool(t *testing.T, connString, name string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(connString)
	must(t, err)
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	must(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// waitGone waits until none of ids is left.
func waitGone(t *testing.T, pool *pgxpool.Pool, ids []int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d jobs to be pruned", len(ids)), func() bool {
		return countJobs(t, pool, "id = ANY($1)", ids) == 0
	})
}

// checkKept fails unless every job of ids is still there.
func checkKept(t *testing.T, pool *pgxpool.Pool, ids []int64) {
	t.Helper()
	if n := countJobs(t, pool, "id = ANY($1)", ids); n != len(ids) {
		t.Fatalf("%d of %d jobs that must be kept are left", n, len(ids))
	}
}

// lockWaits counts the statements of the test's database waiting on a lock.
func lockWaits(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	must(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
	return n
}

// leader returns the holder of the maintenance lease, or "".
func leader(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var holder string
	err := pool.QueryRow(context.Background(), "SELECT coalesce(max(holder), '') FROM pgqueue.leases WHERE name = 'pgqueue:maintenance' AND expires_at > now()").Scan(&holder)
	must(t, err)
	return holder
}

// deletesBy sums the audited deletes by application name: "a:n b:m".
func deletesBy(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var s string
	must(t, pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(client || ':' || n, ' ' ORDER BY client), '')
		FROM (SELECT client, count(*) AS n FROM job_deletes GROUP BY client) d`).Scan(&s))
	return s
}
