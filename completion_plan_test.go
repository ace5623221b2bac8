package pgqueue_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue"
)

// planRows matches the rows a plan node returned and those its filter
// removed, in EXPLAIN ANALYZE's text output.
var planRows = regexp.MustCompile(`rows=(\d+) loops=(\d+)\)|Rows Removed by (?:Filter|Index Recheck): (\d+)`)

// TestCompletionPlanAfterQuietAnalyze plans the batched completions
// (sql/complete_many.sql, sql/finish.sql) and the heartbeat
// (sql/heartbeat.sql, which finds its jobs the same way) on a table analysed while no
// job ran, then holding 100,000 running jobs: a queue analysed while
// quiet, then taking a burst. The statistics then say no row is running,
// and the planner read jobs_running_idx, every running row, for each
// batch (147 ms for 200 completions in a steady run, where 3 ms was
// normal: docs/dev/measurements/2026-12-06-steady-autovacuum.md). A batch
// must read about its own rows through the primary key whatever the
// estimate, in a custom plan and a generic one.
func TestCompletionPlanAfterQuietAnalyze(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "the completion's plan over 100,000 running jobs")
	ctx := context.Background()
	pool := newPool(t)
	c := newClient(t, pool, nil)
	const running, batch = 100000, 200
	_, err := pool.Exec(ctx, `ANALYZE pgqueue.jobs`)
	must(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO pgqueue.jobs (queue, kind, state, attempt, fence, lease_until, attempted_at)
		SELECT 'default', 'note', 'running', 1, g, now() + interval '1 hour', now() FROM generate_series(1, $1::int) g`, running)
	must(t, err)
	var ids, fences []string
	rows, err := pool.Query(ctx, `SELECT id, fence FROM pgqueue.jobs ORDER BY random() LIMIT $1`, batch)
	must(t, err)
	for rows.Next() {
		var id, fence int64
		must(t, rows.Scan(&id, &fence))
		ids, fences = append(ids, strconv.FormatInt(id, 10)), append(fences, strconv.FormatInt(fence, 10))
	}
	must(t, rows.Err())
	arr := func(s []string) string { return "'{" + strings.Join(s, ",") + "}'" }
	ops := make([]string, batch)
	nulls := make([]string, batch)
	zeros := make([]string, batch)
	for i := range ops {
		ops[i], nulls[i], zeros[i] = "complete", "NULL", "0"
	}
	for _, st := range []struct{ name, sql, args string }{
		{"complete_many", pgqueue.CompleteManySQL(c), arr(ids) + ", " + arr(fences)},
		{"finish", pgqueue.FinishSQL(c), strings.Join([]string{arr(ids), arr(fences), arr(ops), arr(nulls), arr(nulls), arr(zeros)}, ", ")},
		{"heartbeat", pgqueue.HeartbeatSQL(c), arr(ids) + ", " + arr(fences) + ", 60000000"},
	} {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			t.Run(st.name+"/"+mode, func(t *testing.T) {
				conn, err := pool.Acquire(ctx)
				must(t, err)
				defer conn.Release()
				// A prepared statement outlives the transaction.
				defer func() { _, _ = conn.Exec(ctx, "DEALLOCATE completion") }()
				tx, err := conn.Begin(ctx)
				must(t, err)
				defer tx.Rollback(ctx)
				_, err = tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode)
				must(t, err)
				_, err = tx.Exec(ctx, "PREPARE completion AS "+st.sql)
				must(t, err)
				r, err := tx.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE completion("+st.args+")")
				must(t, err)
				var lines []string
				for r.Next() {
					var line string
					must(t, r.Scan(&line))
					lines = append(lines, line)
				}
				must(t, r.Err())
				plan := strings.Join(lines, "\n")
				var read int64
				for _, m := range planRows.FindAllStringSubmatch(plan, -1) {
					if m[3] != "" {
						n, _ := strconv.ParseInt(m[3], 10, 64)
						read += n
						continue
					}
					n, _ := strconv.ParseInt(m[1], 10, 64)
					loops, _ := strconv.ParseInt(m[2], 10, 64)
					read += n * loops
				}
				// Each node's rows, in sum: about ten per job of the batch
				// (the arrays, the index entries, the jobs, the join, the
				// update, what the statement returns; 2,002 for 200), so at
				// most 25, where reading the running rows made it 141,602
				// and more.
				if !strings.Contains(plan, fmt.Sprintf("Update on jobs j (actual rows=%d loops=1)", batch)) {
					t.Fatalf("the batch did not update its %d jobs:\n%s", batch, plan)
				}
				if read > 25*batch {
					t.Fatalf("plan nodes read %d rows for a batch of %d:\n%s", read, batch, plan)
				}
			})
		}
	}
}

// TestCompleteOneKeepsThePrimaryKey completes one job (sql/complete_one.sql,
// the completer's statement for a batch of one) several times on one
// connection while the table is a few rows long, so that the function
// complete_one keeps its update's plan, then again once the table holds
// 100,000 running jobs, unanalysed: the kept plan must find the job
// through the primary key. Planned with sequential scans allowed, the plan
// kept from the small table read every row.
func TestCompleteOneKeepsThePrimaryKey(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "the kept plan of one completion over 100,000 running jobs")
	ctx := context.Background()
	pool := newPool(t)
	c := newClient(t, pool, nil)
	insertRunning := func(n int) {
		_, err := pool.Exec(ctx, `INSERT INTO pgqueue.jobs (queue, kind, state, attempt, fence, lease_until, attempted_at)
			SELECT 'default', 'note', 'running', 1, nextval('pgqueue.fence_seq'), now() + interval '1 hour', now()
			FROM generate_series(1, $1::int)`, n)
		must(t, err)
	}
	insertRunning(3)
	_, err := pool.Exec(ctx, `VACUUM ANALYZE pgqueue.jobs`)
	must(t, err)
	var id, fence int64
	must(t, pool.QueryRow(ctx, `SELECT id, fence FROM pgqueue.jobs ORDER BY id LIMIT 1`).Scan(&id, &fence))
	e := newExplainedOn(t, pool)
	// Each completion runs in a transaction rolled back: the job stays
	// running for the next. PL/pgSQL keeps a generic plan from the sixth.
	for range 8 {
		e.run(t, pgqueue.CompleteOneSQL(c), id, fence)
	}
	insertRunning(100_000)
	plans, rows := e.run(t, pgqueue.CompleteOneSQL(c), id, fence)
	if !strings.Contains(plans, "Index Scan using jobs_pkey on jobs j") || rows > 100 {
		t.Fatalf("one completion over 100,000 running jobs: %d rows through its plans:\n%s", rows, plans)
	}
}
