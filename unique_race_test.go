package pgqueue_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// uniqueRace makes a unique insert of the "victim" session race other
// writers at a chosen point, every time: each of its statements that
// inserts into pgqueue.jobs waits at gate 1 (advisory lock 100, in a
// BEFORE INSERT trigger, after the statement's snapshot is taken) and at
// gate 2 (lock 101, in an AFTER statement trigger, once the statement has
// read what it returns), while the test holds the gate's lock.
type uniqueRace struct {
	pool   *pgxpool.Pool // the test's own sessions, not gated
	victim *pgxpool.Pool
	gates  *pgxpool.Conn
}

func newUniqueRace(t *testing.T, mode pgx.QueryExecMode) *uniqueRace {
	t.Helper()
	ctx := context.Background()
	pool := newPool(t)
	_, err := pool.Exec(ctx, `
		CREATE FUNCTION public.victim_gate() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF current_setting('application_name') = 'victim' THEN
				PERFORM pg_advisory_lock(TG_ARGV[0]::bigint);
				PERFORM pg_advisory_unlock(TG_ARGV[0]::bigint);
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER victim_gate_1 BEFORE INSERT ON pgqueue.jobs FOR EACH ROW EXECUTE FUNCTION public.victim_gate(100);
		CREATE TRIGGER victim_gate_2 AFTER INSERT ON pgqueue.jobs FOR EACH STATEMENT EXECUTE FUNCTION public.victim_gate(101);`)
	must(t, err)
	cfg := pool.Config().Copy()
	cfg.ConnConfig.RuntimeParams["application_name"] = "victim"
	cfg.ConnConfig.DefaultQueryExecMode = mode
	victim, err := pgxpool.NewWithConfig(ctx, cfg)
	must(t, err)
	t.Cleanup(victim.Close)
	gates, err := pool.Acquire(ctx)
	must(t, err)
	t.Cleanup(gates.Release)
	return &uniqueRace{pool: pool, victim: victim, gates: gates}
}

// run calls call (the victim's insert) and, at every statement of it,
// runs before while the statement waits at gate 1 and after while it
// waits at gate 2. It returns what call returned and how many statements
// passed the gates.
func (r *uniqueRace) run(t *testing.T, call func() (*pgqueue.EnqueueResult, error), before, after func(round int)) (*pgqueue.EnqueueResult, int, error) {
	t.Helper()
	ctx := context.Background()
	_, err := r.gates.Exec(ctx, `SELECT pg_advisory_lock(100), pg_advisory_lock(101)`)
	must(t, err)
	defer func() {
		_, err := r.gates.Exec(ctx, `SELECT pg_advisory_unlock_all()`)
		must(t, err)
	}()
	type result struct {
		res *pgqueue.EnqueueResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := call()
		done <- result{res, err}
	}()
	// waitAt waits until the victim waits for lock key, or returns its
	// result when it is done.
	waitAt := func(key int) *result {
		deadline := time.Now().Add(30 * time.Second)
		for {
			select {
			case res := <-done:
				return &res
			default:
			}
			var waiting bool
			must(t, r.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks l JOIN pg_stat_activity a USING (pid)
				WHERE a.datname = current_database() AND a.application_name = 'victim' AND l.locktype = 'advisory' AND l.objid = $1 AND NOT l.granted)`, key).Scan(&waiting))
			if waiting {
				return nil
			}
			if time.Now().After(deadline) {
				t.Fatalf("the victim never reached gate %d", key)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	for round := 1; ; round++ {
		if round > 20 {
			t.Fatal("the victim's insert went through 20 statements")
		}
		if res := waitAt(100); res != nil {
			return res.res, round - 1, res.err
		}
		if round > 1 {
			// Free since the victim passed gate 2 of the last round.
			_, err := r.gates.Exec(ctx, `SELECT pg_advisory_lock(101)`)
			must(t, err)
		}
		before(round)
		_, err := r.gates.Exec(ctx, `SELECT pg_advisory_unlock(100)`)
		must(t, err)
		if res := waitAt(101); res != nil {
			t.Fatalf("the victim's statement ended without reaching gate 2: %+v", *res)
		}
		after(round)
		_, err = r.gates.Exec(ctx, `SELECT pg_advisory_lock(100)`)
		must(t, err)
		_, err = r.gates.Exec(ctx, `SELECT pg_advisory_unlock(101)`)
		must(t, err)
	}
}

// setState moves job id to state (with finalized_at when final) unless a
// transaction holds its row, and reports whether it did.
func (r *uniqueRace) setState(t *testing.T, id int64, state string) bool {
	t.Helper()
	tag, err := r.pool.Exec(context.Background(), `
		UPDATE pgqueue.jobs SET state = $2,
			finalized_at = CASE WHEN $2 IN ('completed', 'discarded', 'cancelled') THEN now() END
		WHERE id IN (SELECT id FROM pgqueue.jobs WHERE id = $1 FOR UPDATE SKIP LOCKED)`, id, state)
	must(t, err)
	return tag.RowsAffected() == 1
}

// TestUniqueRacedInsert forces, at every statement, the races that made a
// unique insert come back with "neither inserted nor found": the job
// holding the key is committed, or comes back into its states, after the
// statement's snapshot and before its conflict check. A duplicate must
// return that job, and an insert the new one, in one more statement, with
// Enqueue and with EnqueueTx, whose transaction goes on.
func TestUniqueRacedInsert(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "unique inserts racing a holder that commits, retries or leaves")
	ctx := context.Background()
	opts := &pgqueue.EnqueueOpts{Unique: &pgqueue.UniqueOpts{ByKey: "k", ByState: []pgqueue.JobState{
		pgqueue.StateScheduled, pgqueue.StateAvailable, pgqueue.StateRunning}}}

	// victimCall returns the victim's Enqueue, or EnqueueTx in a
	// transaction that runs a statement after it and commits. In the
	// transaction, a duplicate's row must not stay locked.
	victimCall := func(t *testing.T, r *uniqueRace, inTx bool) func() (*pgqueue.EnqueueResult, error) {
		c := newClient(t, r.victim, nil)
		if !inTx {
			return func() (*pgqueue.EnqueueResult, error) { return c.Enqueue(ctx, chargeArgs{Order: 1}, opts) }
		}
		return func() (*pgqueue.EnqueueResult, error) {
			var res *pgqueue.EnqueueResult
			err := pgx.BeginFunc(ctx, r.victim, func(tx pgx.Tx) error {
				var err error
				if res, err = c.EnqueueTx(ctx, tx, chargeArgs{Order: 1}, opts); err != nil {
					return err
				}
				if res.Duplicate {
					var id int64
					if err := r.pool.QueryRow(ctx, `SELECT id FROM pgqueue.jobs WHERE id = $1 FOR UPDATE NOWAIT`, res.ID).Scan(&id); err != nil {
						return fmt.Errorf("the duplicate's row is still locked by the inserting transaction: %w", err)
					}
				}
				_, err = tx.Exec(ctx, `CREATE TABLE after_enqueue ()`)
				return err
			})
			return res, err
		}
	}
	checkTxWentOn := func(t *testing.T, r *uniqueRace, inTx bool) {
		t.Helper()
		if !inTx {
			return
		}
		var exists bool
		must(t, r.pool.QueryRow(ctx, `SELECT to_regclass('after_enqueue') IS NOT NULL`).Scan(&exists))
		if !exists {
			t.Error("the caller's transaction did not commit its statement after EnqueueTx")
		}
	}

	// The victim's statements prepared and cached (pgx's default), and
	// sent as text (as through poolers that cannot keep them).
	for _, v := range []struct {
		inTx bool
		mode pgx.QueryExecMode
	}{{false, pgx.QueryExecModeCacheStatement}, {true, pgx.QueryExecModeCacheStatement}, {false, pgx.QueryExecModeSimpleProtocol}, {true, pgx.QueryExecModeSimpleProtocol}} {
		inTx := v.inTx
		name := map[bool]string{false: "Enqueue", true: "EnqueueTx"}[inTx] + "/" + v.mode.String()

		// Every statement: no job holds the key at its snapshot; one is
		// inserted and committed before its conflict check; a worker
		// completes it before the next statement, unless that statement
		// holds its row.
		t.Run(name+"/HolderCommittedAfterSnapshot", func(t *testing.T) {
			t.Parallel()
			r := newUniqueRace(t, v.mode)
			other := newClient(t, r.pool, nil)
			var ids []int64
			res, rounds, err := r.run(t, victimCall(t, r, inTx), func(int) {
				res, err := other.Enqueue(ctx, chargeArgs{Order: 2}, opts)
				must(t, err)
				if res.Duplicate {
					t.Fatalf("the race's own insert found job %d holding the key", res.ID)
				}
				ids = append(ids, res.ID)
			}, func(round int) {
				r.setState(t, ids[round-1], "completed")
			})
			if err != nil {
				t.Fatalf("after %d statements: %v", rounds, err)
			}
			last := ids[len(ids)-1]
			if !res.Duplicate || res.ID != last || rounds != 2 {
				t.Fatalf("after %d statements: job %d, duplicate %v; want a duplicate of the holder, job %d, after 2", rounds, res.ID, res.Duplicate, last)
			}
			if n := countJobs(t, r.pool, "state = 'available'"); n != 1 {
				t.Errorf("%d available jobs, want the holder alone", n)
			}
			checkTxWentOn(t, r, inTx)
		})

		// Every statement: the job that held the key was discarded at its
		// snapshot, and is retried (back in its states) before its
		// conflict check; discarded again before the next statement.
		t.Run(name+"/HolderRetriedAfterSnapshot", func(t *testing.T) {
			t.Parallel()
			r := newUniqueRace(t, v.mode)
			other := newClient(t, r.pool, nil)
			held, err := other.Enqueue(ctx, chargeArgs{Order: 2}, opts)
			must(t, err)
			r.setState(t, held.ID, "discarded")
			res, rounds, err := r.run(t, victimCall(t, r, inTx), func(int) {
				_, err := other.JobRetry(ctx, held.ID)
				must(t, err)
			}, func(int) {
				r.setState(t, held.ID, "discarded")
			})
			if err != nil {
				t.Fatalf("after %d statements: %v", rounds, err)
			}
			if !res.Duplicate || res.ID != held.ID || rounds != 2 {
				t.Fatalf("after %d statements: job %d, duplicate %v; want a duplicate of the retried job %d, after 2", rounds, res.ID, res.Duplicate, held.ID)
			}
			checkTxWentOn(t, r, inTx)
		})

		// The first statement: as above; the holder completes before the
		// second, which inserts.
		t.Run(name+"/HolderLeftBeforeTheSecondStatement", func(t *testing.T) {
			t.Parallel()
			r := newUniqueRace(t, v.mode)
			other := newClient(t, r.pool, nil)
			var holder int64
			res, rounds, err := r.run(t, victimCall(t, r, inTx), func(round int) {
				if round == 1 {
					res, err := other.Enqueue(ctx, chargeArgs{Order: 2}, opts)
					must(t, err)
					holder = res.ID
				}
			}, func(round int) {
				if round == 1 && !r.setState(t, holder, "completed") {
					t.Fatal("the holder's row was locked")
				}
			})
			if err != nil {
				t.Fatalf("after %d statements: %v", rounds, err)
			}
			if res.Duplicate || res.ID == holder || rounds != 2 {
				t.Fatalf("after %d statements: job %d, duplicate %v; want a new job after 2", rounds, res.ID, res.Duplicate)
			}
			if s := readJob(t, r.pool, res.ID); s.state != "available" {
				t.Errorf("the new job is %s, want available", s.state)
			}
			checkTxWentOn(t, r, inTx)
		})
	}
}

// TestUniqueUnderChurn inserts the same unique keys from many goroutines
// of four clients while a worker completes each job as soon as it can, so
// that inserts keep meeting a holder that has just been inserted or has
// just finished. Every call must end inserted or with the job holding the
// key; the table must agree with what the calls reported.
func TestUniqueUnderChurn(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "unique inserts of 4 clients while a worker completes the jobs")
	ctx := context.Background()
	pool := newPool(t)
	const (
		clients    = 4
		goroutines = 8
		keys       = 20
	)
	calls := 400
	if testing.Short() {
		calls = 100
	}
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(context.Context, *pgqueue.Job[chargeArgs]) error { return nil }, nil))
	startClient(t, pool, ws, &pgqueue.Config{Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 20}},
		FetchPollInterval: 5 * time.Millisecond})

	_, err := pool.Exec(ctx, `CREATE TABLE churn_calls (key text, job_id bigint, duplicate boolean)`)
	must(t, err)
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		c := newClient(t, pool, nil)
		for g := range goroutines {
			wg.Go(func() {
				for i := range calls {
					key := fmt.Sprintf("k%d", (g*7+i)%keys)
					opts := &pgqueue.EnqueueOpts{Unique: &pgqueue.UniqueOpts{ByKey: key, ByState: []pgqueue.JobState{
						pgqueue.StateScheduled, pgqueue.StateAvailable, pgqueue.StateRunning}}}
					res, err := c.Enqueue(ctx, chargeArgs{Order: i, Customer: key}, opts)
					if err != nil {
						if failed.Add(1) <= 5 {
							t.Errorf("enqueue %s: %v", key, err)
						}
						continue
					}
					if _, err := pool.Exec(ctx, `INSERT INTO churn_calls VALUES ($1, $2, $3)`, key, res.ID, res.Duplicate); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d calls failed", n, clients*goroutines*calls)
	}
	// Each job was reported inserted by one call, and every duplicate
	// named a job of its own key; no key ever had two jobs in its states
	// (the index), and every job of the table was reported.
	var bad, jobs, inserted, dups int
	must(t, pool.QueryRow(ctx, `
		SELECT
			(SELECT count(*) FROM churn_calls c JOIN pgqueue.jobs j ON j.id = c.job_id WHERE j.args->>'customer' <> c.key)
			+ (SELECT count(*) FROM churn_calls c WHERE NOT EXISTS (SELECT FROM pgqueue.jobs j WHERE j.id = c.job_id))
			+ (SELECT count(*) FROM (SELECT job_id FROM churn_calls WHERE NOT duplicate GROUP BY job_id HAVING count(*) > 1) x)
			+ (SELECT count(*) FROM pgqueue.jobs j WHERE NOT EXISTS (SELECT FROM churn_calls c WHERE c.job_id = j.id AND NOT c.duplicate)),
			(SELECT count(*) FROM pgqueue.jobs),
			(SELECT count(*) FROM churn_calls WHERE NOT duplicate),
			(SELECT count(*) FROM churn_calls WHERE duplicate)`).Scan(&bad, &jobs, &inserted, &dups))
	if bad != 0 {
		t.Errorf("%d inconsistencies between the calls' reports and the table", bad)
	}
	t.Logf("%d calls: %d inserted (%d jobs in the table), %d duplicates", inserted+dups, inserted, jobs, dups)
	if inserted < keys {
		t.Errorf("%d inserts for %d keys: the worker did not churn", inserted, keys)
	}
}
