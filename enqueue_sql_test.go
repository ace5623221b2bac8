package pgqueue_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgqueue/pgqueue"
)

// TestEnqueueSQL checks the SQL function enqueue() (migration 6, the flow
// keys since migration 11): jobs it inserts are worked by Go workers,
// woken by its notification; it validates like the Go API, with SQLSTATEs
// of its own; it honours uniqueness, also against jobs enqueued from Go;
// it stores the flow keys as the Go API does.
func TestEnqueueSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("WorkedByAGoWorkerWokenByItsNotification", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		var got atomic.Value
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(_ context.Context, job *pgqueue.Job[emailArgs]) error {
			got.Store(job.Args.To)
			return nil
		}, nil))
		// No poll: only the notification can wake the worker in time.
		startClient(t, pool, ws, &pgqueue.Config{FetchPollInterval: time.Hour})
		time.Sleep(200 * time.Millisecond) // the LISTEN connection is up
		var id int64
		var dup bool
		must(t, pool.QueryRow(ctx, `SELECT * FROM pgqueue.enqueue('email', '{"to": "ada@example.com"}')`).Scan(&id, &dup))
		if dup {
			t.Fatal("a job that is not unique came back a duplicate")
		}
		waitState(t, pool, id, "completed")
		if got.Load() != "ada@example.com" {
			t.Fatalf("worker got %v", got.Load())
		}
	})

	t.Run("FromATriggerInTheRowChangesTransaction", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		_, err := pool.Exec(ctx, `
			CREATE TABLE orders (id bigint PRIMARY KEY, email text NOT NULL);
			CREATE FUNCTION order_placed() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				PERFORM pgqueue.enqueue('email', jsonb_build_object('to', NEW.email),
				                        unique_key => 'order-' || NEW.id);
				RETURN NEW;
			END $$;
			CREATE TRIGGER order_placed AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION order_placed();`)
		must(t, err)

		tx, err := pool.Begin(ctx)
		must(t, err)
		_, err = tx.Exec(ctx, "INSERT INTO orders VALUES (1, 'rolled@back.example')")
		must(t, err)
		must(t, tx.Rollback(ctx))
		if n := countJobs(t, pool, "kind = 'email'"); n != 0 {
			t.Fatalf("a rolled-back order left %d jobs", n)
		}

		_, err = pool.Exec(ctx, "INSERT INTO orders VALUES (2, 'bob@example.com')")
		must(t, err)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(context.Context, *pgqueue.Job[emailArgs]) error { return nil }, nil))
		startClient(t, pool, ws, nil)
		waitFor(t, "the order's job to complete", func() bool {
			return countJobs(t, pool, "kind = 'email' AND state = 'completed' AND args->>'to' = 'bob@example.com'") == 1
		})
	})

	t.Run("OptionsAndScheduledJobs", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		var id int64
		must(t, pool.QueryRow(ctx, `SELECT job_id FROM pgqueue.enqueue('email', '{}', queue => 'mail', priority => 3::smallint,
			run_at => now() + interval '1 hour', max_attempts => 5, tags => '{a,b}', meta => '{"m": 1}')`).Scan(&id))
		j := readJob(t, pool, id)
		if j.state != "scheduled" {
			t.Fatalf("state %s, want scheduled", j.state)
		}
		if countJobs(t, pool, "id = $1 AND queue = 'mail' AND priority = 3 AND max_attempts = 5 AND tags = '{a,b}' AND meta = '{\"m\": 1}'", id) != 1 {
			t.Fatal("the options were not stored")
		}
	})

	t.Run("ValidatesWithItsOwnSQLSTATEs", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		for _, tc := range []struct{ name, sql, code string }{
			{"EmptyKind", `SELECT pgqueue.enqueue('')`, "PQE01"},
			{"LongKind", `SELECT pgqueue.enqueue(repeat('k', 256))`, "PQE01"},
			{"BadQueue", `SELECT pgqueue.enqueue('email', queue => 'Bad Queue')`, "PQE02"},
			{"NullArgs", `SELECT pgqueue.enqueue('email', NULL)`, "PQE03"},
			{"LargeArgs", `SELECT pgqueue.enqueue('email', jsonb_build_object('x', repeat('x', 1048576)))`, "PQE03"},
			{"ZeroAttempts", `SELECT pgqueue.enqueue('email', max_attempts => 0)`, "PQE04"},
			{"NullTag", `SELECT pgqueue.enqueue('email', tags => ARRAY[NULL::text])`, "PQE04"},
			{"StatesWithoutRunning", `SELECT pgqueue.enqueue('email', unique_key => 'k', unique_states => '{scheduled,available}')`, "PQE04"},
			{"UnknownState", `SELECT pgqueue.enqueue('email', unique_key => 'k', unique_states => '{scheduled,available,running,lost}')`, "PQE04"},
			{"NegativePeriod", `SELECT pgqueue.enqueue('email', unique_key => 'k', unique_period => interval '-1 hour')`, "PQE04"},
			{"EmptyPartitionKey", `SELECT pgqueue.enqueue('email', partition_key => '')`, "PQE04"},
			{"LongPartitionKey", `SELECT pgqueue.enqueue('email', partition_key => repeat('p', 256))`, "PQE04"},
			{"EmptySequenceKey", `SELECT pgqueue.enqueue('email', sequence_key => '')`, "PQE04"},
			{"LongSequenceKey", `SELECT pgqueue.enqueue('email', sequence_key => repeat('é', 128))`, "PQE04"},
		} {
			_, err := pool.Exec(ctx, tc.sql)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != tc.code {
				t.Errorf("%s: got %v, want SQLSTATE %s", tc.name, err, tc.code)
			}
		}
		if n := countJobs(t, pool, "true"); n != 0 {
			t.Fatalf("refused calls left %d jobs", n)
		}
	})

	t.Run("FlowKeys", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		long := strings.Repeat("é", 127) + "k" // 255 bytes, as the Go API allows
		for _, tc := range []struct {
			name, sql           string
			partition, sequence string
		}{
			{"Both", `SELECT job_id FROM pgqueue.enqueue('email', partition_key => 'tenant-7', sequence_key => 'order-42')`, "tenant-7", "order-42"},
			{"Longest", `SELECT job_id FROM pgqueue.enqueue('email', partition_key => $1, sequence_key => $1)`, long, long},
			{"NULLs", `SELECT job_id FROM pgqueue.enqueue('email', partition_key => NULL, sequence_key => NULL)`, "", ""},
			{"Defaults", `SELECT job_id FROM pgqueue.enqueue('email')`, "", ""},
			// Positional: the new parameters come last.
			{"Positional", `SELECT job_id FROM pgqueue.enqueue('email', '{}', 'default', 0::smallint, NULL, 25, '{}', '{}',
				NULL, NULL, NULL, 'p', 's')`, "p", "s"},
			// A unique job too; the duplicate keeps the first job's keys.
			{"Unique", `SELECT job_id FROM pgqueue.enqueue('email', unique_key => 'u', partition_key => 'p1', sequence_key => 's1')`, "p1", "s1"},
		} {
			var args []any
			if strings.Contains(tc.sql, "$1") {
				args = append(args, long)
			}
			var id int64
			must(t, pool.QueryRow(ctx, tc.sql, args...).Scan(&id))
			job, err := c.JobGet(ctx, id)
			must(t, err)
			if job.PartitionKey != tc.partition || job.SequenceKey != tc.sequence {
				t.Errorf("%s: keys %q, %q; want %q, %q", tc.name, job.PartitionKey, job.SequenceKey, tc.partition, tc.sequence)
			}
		}
		var first, again int64
		var dup bool
		must(t, pool.QueryRow(ctx, `SELECT id FROM pgqueue.jobs WHERE unique_key IS NOT NULL`).Scan(&first))
		must(t, pool.QueryRow(ctx, `SELECT * FROM pgqueue.enqueue('email', unique_key => 'u', partition_key => 'p2')`).Scan(&again, &dup))
		if !dup || again != first {
			t.Fatalf("(%d, %v), want a duplicate of job %d", again, dup, first)
		}
		if job, err := c.JobGet(ctx, first); err != nil || job.PartitionKey != "p1" || job.SequenceKey != "s1" {
			t.Fatalf("the unique job after a duplicate: %+v, %v", job, err)
		}
		// The same keys from Go and from SQL are the same columns.
		res, err := c.Enqueue(ctx, emailArgs{}, &pgqueue.EnqueueOpts{PartitionKey: long, SequenceKey: long})
		must(t, err)
		if n := countJobs(t, pool, "partition_key = $1 AND sequence_key = $1", long); n != 2 {
			t.Fatalf("%d jobs with the longest keys, want 2 (job %d from Go and one from SQL)", n, res.ID)
		}
	})

	t.Run("UniqueAlsoAgainstGo", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		var first, second int64
		var dup1, dup2 bool
		must(t, pool.QueryRow(ctx, `SELECT * FROM pgqueue.enqueue('charge', '{"order": 7}', unique_key => 'order-7')`).Scan(&first, &dup1))
		must(t, pool.QueryRow(ctx, `SELECT * FROM pgqueue.enqueue('charge', '{"order": 7, "again": true}', unique_key => 'order-7')`).Scan(&second, &dup2))
		if dup1 || !dup2 || second != first {
			t.Fatalf("first (%d, %v), second (%d, %v): want the second a duplicate of the first", first, dup1, second, dup2)
		}
		// The same kind and key from Go is the same job.
		res, err := newClient(t, pool, nil).Enqueue(ctx, chargeArgs{Order: 7}, &pgqueue.EnqueueOpts{Unique: &pgqueue.UniqueOpts{ByKey: "order-7"}})
		must(t, err)
		if !res.Duplicate || res.ID != first {
			t.Fatalf("Go enqueue with the same key: %+v, want a duplicate of job %d", res, first)
		}
		// Another key, or a key per hour in the next hour, is another job.
		var other int64
		var dup bool
		must(t, pool.QueryRow(ctx, `SELECT * FROM pgqueue.enqueue('charge', '{}', unique_key => 'order-8')`).Scan(&other, &dup))
		if dup {
			t.Fatal("another key was a duplicate")
		}
		hourly := `SELECT * FROM pgqueue.enqueue('charge', '{}', run_at => $1, unique_key => 'hourly', unique_period => interval '1 hour')`
		base := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
		var a, b, c int64
		var dupA, dupB, dupC bool
		must(t, pool.QueryRow(ctx, hourly, base.Add(5*time.Minute)).Scan(&a, &dupA))
		must(t, pool.QueryRow(ctx, hourly, base.Add(55*time.Minute)).Scan(&b, &dupB))
		must(t, pool.QueryRow(ctx, hourly, base.Add(65*time.Minute)).Scan(&c, &dupC))
		if dupA || !dupB || b != a || dupC {
			t.Fatalf("hourly: (%d %v) (%d %v) (%d %v)", a, dupA, b, dupB, c, dupC)
		}
		// The Go client's hour agrees with the SQL function's.
		res, err = newClient(t, pool, nil).Enqueue(ctx, chargeArgs{}, &pgqueue.EnqueueOpts{RunAt: base.Add(30 * time.Minute),
			Unique: &pgqueue.UniqueOpts{ByKey: "hourly", ByPeriod: time.Hour}})
		must(t, err)
		if !res.Duplicate || res.ID != a {
			t.Fatalf("Go enqueue in the same hour: %+v, want a duplicate of job %d", res, a)
		}
	})
}
