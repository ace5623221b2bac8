package pgqueue_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue"
)

// JobCancelMany, JobDeleteMany and JobRetryMany lock their jobs in id
// order, as completions lock theirs (the completer sends its batches
// sorted): a statement that locked them in its plan's order (a bitmap
// scan's, which is the table's) deadlocked with the completions of the
// same jobs.
//
// The setup makes the plan's order differ from the ids': lockOrderJobs
// scheduled jobs beside lockOrderOthers available ones, the table
// rewritten in an order unrelated to the ids (CLUSTER on md5(id), as rows
// moved by their updates leave a busy table), then analyzed. Thus the
// planner reads the call's ids through a bitmap scan of the primary key:
// not an index scan (the ids' correlation with the table's order is gone),
// not a scan of the whole table (the call's jobs are few of it; with fewer
// others it is a Seq Scan, table order too). The call's transaction also
// turns index and sequential scans off, so that a server whose costs say
// otherwise plans the same. The test EXPLAINs each statement's write as
// it was before it locked in id order, and insists on the bitmap scan. The lowest-id job's row is then moved after every
// other by an update of its run_at (an indexed column: a HOT update would
// leave it where the index finds it).
//
// Another transaction holds that row; the call starts in a transaction of
// its own, and the test waits until its backend waits on a lock. Locking
// in id order, it waits on that row before it locks any other, so a third
// session finds every other job free (FOR UPDATE SKIP LOCKED); locking in
// the plan's order, it has locked all the others, which come before that
// row in the table, and finds none.
func TestManyJobCallsLockInIDOrder(t *testing.T) {
	t.Parallel()
	calls := []struct {
		name string
		call func(c *pgqueue.Client, ctx context.Context, tx pgx.Tx, ids []int64) (*pgqueue.JobManyResult, error)
		// write is the statement's write as it was before it locked in
		// id order: its plan is the one the test checks.
		write string
		// after counts the call's jobs once it committed, and want is that
		// count.
		after string
		want  int
	}{
		{"JobCancelManyTx", (*pgqueue.Client).JobCancelManyTx,
			`UPDATE pgqueue.jobs j SET state = 'cancelled', finalized_at = now()
			 WHERE j.id = ANY ($1::bigint[]) AND j.state IN ('blocked', 'scheduled', 'available', 'running')`,
			"id = ANY($1) AND state = 'cancelled'", lockOrderJobs},
		{"JobDeleteManyTx", (*pgqueue.Client).JobDeleteManyTx,
			`DELETE FROM pgqueue.jobs WHERE id = ANY ($1::bigint[]) AND state <> 'running'`,
			"id = ANY($1)", 0},
		{"JobRetryManyTx", (*pgqueue.Client).JobRetryManyTx,
			`UPDATE pgqueue.jobs SET state = 'available', run_at = now(), finalized_at = NULL
			 WHERE id = ANY ($1::bigint[]) AND state IN ('scheduled', 'completed', 'discarded', 'cancelled')`,
			"id = ANY($1) AND state = 'available'", lockOrderJobs},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setupControl(t)
			ids := lockOrderSetup(t, b)
			lowest := ids[0]

			// The call's transaction reads jobs through bitmap scans only,
			// whatever the server's cost settings: the write as it was
			// then takes its rows in the table's order.
			bitmapOnly := func(tx pgx.Tx) {
				_, err := tx.Exec(ctx, "SET LOCAL enable_indexscan = off; SET LOCAL enable_seqscan = off")
				must(t, err)
			}
			explain := b.mustBegin(t)
			bitmapOnly(explain)
			rows, err := explain.Query(ctx, "EXPLAIN (COSTS OFF) "+c.write, ids)
			must(t, err)
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			must(t, err)
			must(t, explain.Rollback(ctx))
			plan := strings.Join(lines, "\n")
			if !strings.Contains(plan, "Bitmap Heap Scan") {
				t.Fatalf("the write as it was before the change is not planned as a bitmap scan, whose order is the table's: "+
					"the test would prove nothing:\n%s", plan)
			}

			holder := b.mustBegin(t)
			_, err = holder.Exec(ctx, "SELECT FROM pgqueue.jobs WHERE id = $1 FOR UPDATE", lowest)
			must(t, err)
			tx := b.mustBegin(t)
			bitmapOnly(tx)
			var pid int
			must(t, tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
			type result struct {
				res *pgqueue.JobManyResult
				err error
			}
			done := make(chan result, 1)
			go func() {
				res, err := c.call(b.client, ctx, tx, ids)
				done <- result{res, err}
			}()

			// Wait until the call waits on a lock: the held row.
			deadline := time.Now().Add(30 * time.Second)
			for {
				var waiting bool
				must(t, b.pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock')", pid).Scan(&waiting))
				if waiting {
					break
				}
				select {
				case r := <-done:
					t.Fatalf("the call returned (%+v, %v) while another transaction held job %d", r.res, r.err, lowest)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("timed out waiting for the call to wait on job %d's lock", lowest)
				}
				time.Sleep(10 * time.Millisecond)
			}

			probe := b.mustBegin(t)
			rows, err = probe.Query(ctx, "SELECT id FROM pgqueue.jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE SKIP LOCKED", ids)
			must(t, err)
			free, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			must(t, err)
			must(t, probe.Rollback(ctx))
			if !slices.Equal(free, ids[1:]) {
				t.Errorf("while the call waited on job %d, the lowest id, %d of the other %d jobs were free, want all: "+
					"it locks in its plan's order, not in id order", lowest, len(free), len(ids)-1)
			}

			must(t, holder.Rollback(ctx))
			r := <-done
			must(t, r.err)
			must(t, tx.Commit(ctx))
			if !slices.Equal(r.res.Changed, ids) || len(r.res.Unchanged)+len(r.res.Running)+len(r.res.CancelRequested)+len(r.res.NotFound) != 0 {
				t.Errorf("result %+v, want every job changed", r.res)
			}
			if n := countJobs(t, b.pool, c.after, ids); n != c.want {
				t.Errorf("%d jobs where %s after the call, want %d", n, c.after, c.want)
			}
		})
	}
}

const (
	lockOrderJobs   = 100
	lockOrderOthers = 20000
)

// lockOrderSetup enqueues lockOrderOthers available jobs and
// lockOrderJobs scheduled ones, rewrites the table in the order of
// (state, md5(id)) (the scheduled jobs last, shuffled), moves the row of
// the lowest-id scheduled job after every other, analyzes the table, and
// returns the scheduled jobs' ids, ascending.
func lockOrderSetup(t *testing.T, b *controlBundle) []int64 {
	t.Helper()
	ctx := context.Background()
	_, err := b.client.EnqueueMany(ctx, noteParams(lockOrderOthers))
	must(t, err)
	params := noteParams(lockOrderJobs)
	for i := range params {
		params[i].Opts = &pgqueue.EnqueueOpts{RunAt: time.Now().Add(time.Hour)}
	}
	_, err = b.client.EnqueueMany(ctx, params)
	must(t, err)
	rows, err := b.pool.Query(ctx, "SELECT id FROM pgqueue.jobs WHERE state = 'scheduled' ORDER BY id")
	must(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	must(t, err)
	if len(ids) != lockOrderJobs {
		t.Fatalf("%d scheduled jobs, want %d", len(ids), lockOrderJobs)
	}
	_, err = b.pool.Exec(ctx, `
		CREATE INDEX lock_order_shuffle ON pgqueue.jobs (state, md5(id::text));
		CLUSTER pgqueue.jobs USING lock_order_shuffle;
		DROP INDEX pgqueue.lock_order_shuffle`)
	must(t, err)
	_, err = b.pool.Exec(ctx, "UPDATE pgqueue.jobs SET run_at = run_at + interval '1 minute' WHERE id = $1", ids[0])
	must(t, err)
	_, err = b.pool.Exec(ctx, "ANALYZE pgqueue.jobs")
	must(t, err)
	var last int64
	must(t, b.pool.QueryRow(ctx, "SELECT id FROM pgqueue.jobs WHERE id = ANY($1) ORDER BY ctid DESC LIMIT 1", ids).Scan(&last))
	if last != ids[0] {
		t.Fatalf("job %d's row is the table's last of the call's jobs, want job %d's", last, ids[0])
	}
	return ids
}
