package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testlog"
	"github.com/pgqueue/pgqueue/pglock"
)

type spanArgs struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

func (spanArgs) Kind() string { return "span" }

func TestSingletonJobs(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "singleton jobs of 3 clients on 2 keys in both modes, never overlapping")
	const (
		clients = 3
		workers = 4
		jobs    = 30
	)
	keys := []string{"alpha", "beta"}

	for _, mode := range []struct {
		name string
		mode pgqueue.SingletonMode
	}{{"Xact", pgqueue.SingletonXact}, {"Session", pgqueue.SingletonSession}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			pool := newPool(t)
			// spans: when each job's handler ran, by the database clock.
			// snoozes: every hand-back of a running job to the queue (a
			// busy key) with the attempt count it left.
			_, err := pool.Exec(ctx, `
				CREATE TABLE spans (
					id         bigserial PRIMARY KEY,
					job_id     bigint NOT NULL,
					key        text NOT NULL,
					lock_fence bigint NOT NULL,
					started    timestamptz NOT NULL,
					ended      timestamptz NOT NULL
				);
				CREATE TABLE snoozes (job_id bigint, attempt int);
				CREATE FUNCTION audit_snooze() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					INSERT INTO snoozes VALUES (NEW.id, NEW.attempt);
					RETURN NULL;
				END $$;
				CREATE TRIGGER audit_snooze AFTER UPDATE ON pgqueue.jobs FOR EACH ROW
					WHEN (OLD.state = 'running' AND NEW.state IN ('scheduled', 'available'))
					EXECUTE FUNCTION audit_snooze();`)
			must(t, err)

			fc := newClient(t, pool, nil)
			ws := pgqueue.NewWorkers()
			record := func(ctx context.Context, tx pgx.Tx, job *pgqueue.Job[spanArgs], start time.Time) error {
				_, err := tx.Exec(ctx, `INSERT INTO spans (job_id, key, lock_fence, started, ended) VALUES ($1, $2, $3, $4, clock_timestamp())`,
					job.ID, job.Args.Key, job.LockFence, start)
				return err
			}
			work := func(ctx context.Context, job *pgqueue.Job[spanArgs]) error {
				if job.LockFence <= 0 {
					return fmt.Errorf("job %d: no lock fence", job.ID)
				}
				pause := time.Duration(5+rand.IntN(15)) * time.Millisecond
				if mode.mode == pgqueue.SingletonXact {
					if job.Tx == nil {
						return fmt.Errorf("job %d: no Tx in xact mode", job.ID)
					}
					var start time.Time
					if err := job.Tx.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&start); err != nil {
						return err
					}
					time.Sleep(pause)
					return record(ctx, job.Tx, job, start)
				}
				if job.Tx != nil {
					return fmt.Errorf("job %d: Tx in session mode", job.ID)
				}
				var start time.Time
				if err := pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&start); err != nil {
					return err
				}
				time.Sleep(pause)
				tx, err := pool.Begin(ctx)
				if err != nil {
					return err
				}
				defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
				if err := fc.CheckFenceTx(ctx, tx, pgqueue.SingletonResource(job.Args.Key), job.LockFence); err != nil {
					return err
				}
				if err := record(ctx, tx, job, start); err != nil {
					return err
				}
				return tx.Commit(ctx)
			}
			must(t, pgqueue.AddWorkerFunc(ws, work, &pgqueue.WorkerOpts{SingletonMode: mode.mode}))

			for i := range clients {
				cfg := pool.Config()
				cfg.MaxConns = workers + 4
				p, err := pgxpool.NewWithConfig(ctx, cfg)
				must(t, err)
				t.Cleanup(p.Close)
				startClient(t, p, ws, &pgqueue.Config{
					ID:                  fmt.Sprintf("client%d", i),
					Queues:              map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: workers}},
					SingletonRetryDelay: 20 * time.Millisecond,
					SchedulerInterval:   20 * time.Millisecond,
					FetchPollInterval:   20 * time.Millisecond,
					Logger:              testlog.Discard(),
				})
			}
			params := make([]pgqueue.EnqueueManyParams, jobs)
			for i := range params {
				key := keys[i%len(keys)]
				params[i] = pgqueue.EnqueueManyParams{Args: spanArgs{Key: key, N: i}, Opts: &pgqueue.EnqueueOpts{SingletonKey: key}}
			}
			res, err := fc.EnqueueMany(ctx, params)
			if err != nil || res.Enqueued != jobs {
				t.Fatalf("enqueued %+v jobs: %v", res, err)
			}
			waitFor(t, "every job to complete", func() bool {
				return countJobs(t, pool, "state = 'completed'") == jobs
			})

			var overlaps []string
			rows, err := pool.Query(ctx, `
				SELECT format('%s: job %s [%s, %s] overlaps job %s [%s, %s]', a.key, a.job_id, a.started, a.ended, b.job_id, b.started, b.ended)
				FROM spans a JOIN spans b ON a.key = b.key AND a.id < b.id
				WHERE tstzrange(a.started, a.ended) && tstzrange(b.started, b.ended)`)
			must(t, err)
			overlaps, err = pgx.CollectRows(rows, pgx.RowTo[string])
			must(t, err)
			if len(overlaps) > 0 {
				t.Errorf("%d overlapping runs of one key, e.g. %s", len(overlaps), overlaps[0])
			}
			if n := countJobs(t, pool, "attempt <> 1 OR jsonb_array_length(errors) > 0"); n != 0 {
				t.Errorf("%d jobs spent more than one attempt or failed", n)
			}
			var spans, distinct, snoozed, snoozeAttempts int
			must(t, pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT job_id), (SELECT count(*) FROM snoozes), (SELECT count(*) FROM snoozes WHERE attempt <> 0) FROM spans`).
				Scan(&spans, &distinct, &snoozed, &snoozeAttempts))
			if spans != jobs || distinct != jobs {
				t.Errorf("%d spans of %d jobs, want one per job", spans, distinct)
			}
			if snoozed == 0 {
				t.Error("no job found its key busy: the test did not test that")
			}
			if snoozeAttempts != 0 {
				t.Errorf("%d hand-backs to the queue kept the attempt (a failure, or a busy key charged an attempt)", snoozeAttempts)
			}
			// Each key's runs, in time order, hold increasing lock fences.
			if n := countFenceOrderViolations(t, pool); n != 0 {
				t.Errorf("%d runs of a key hold a lower lock fence than the run before", n)
			}
			if !t.Failed() {
				t.Logf("%d jobs, %d busy hand-backs, no overlap", jobs, snoozed)
			}
		})
	}
}

func countFenceOrderViolations(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	must(t, pool.QueryRow(context.Background(), `
		SELECT count(*) FROM (
			SELECT lock_fence, lag(lock_fence) OVER (PARTITION BY key ORDER BY started) AS prev FROM spans
		) s WHERE lock_fence <= prev`).Scan(&n))
	return n
}

// TestSingletonSessionLockLost: when a session-mode singleton job's lock is
// lost (its backend is terminated), the handler's context is cancelled with
// cause pglock.ErrLost, and the key's job runs again later.
func TestSingletonSessionLockLost(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "a lost session lock cancelling the singleton job's handler")
	ctx := t.Context()
	pool := newPool(t)
	locker, err := pglock.New(pool, nil)
	must(t, err)
	key := locker.Key(pgqueue.SingletonResource("alpha"))

	var runs atomic.Int32
	causes := make(chan error, 1)
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[spanArgs]) error {
		if runs.Add(1) > 1 {
			return nil
		}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	}, &pgqueue.WorkerOpts{SingletonMode: pgqueue.SingletonSession}))
	b := startClient(t, pool, ws, &pgqueue.Config{Logger: testlog.Discard()})
	job, err := b.client.Enqueue(ctx, spanArgs{Key: "alpha"}, &pgqueue.EnqueueOpts{SingletonKey: "alpha"})
	must(t, err)

	var pids []int32
	waitFor(t, "the job to hold its key's lock", func() bool {
		pids = singletonLockHolders(t, pool, key)
		return len(pids) == 1 && runs.Load() == 1
	})
	var terminated bool
	must(t, pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pids[0]).Scan(&terminated))
	if !terminated {
		t.Fatalf("could not terminate backend %d", pids[0])
	}
	select {
	case cause := <-causes:
		if !errors.Is(cause, pglock.ErrLost) {
			t.Fatalf("handler's context cause %v, want pglock.ErrLost", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler's context not cancelled within 10s of its lock's backend ending")
	}
	waitState(t, pool, job.ID, "completed")
}

// singletonLockHolders returns the backends of this database that hold the
// two-int4 advisory lock k. pg_locks shows the keys as oid, unsigned, hence
// the conversion.
func singletonLockHolders(t *testing.T, pool *pgxpool.Pool, k pglock.Key) []int32 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT pid FROM pg_locks
		WHERE locktype = 'advisory' AND granted
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 2
		ORDER BY pid`, int64(uint32(k.Class)), int64(uint32(k.Object)))
	must(t, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	must(t, err)
	return pids
}
