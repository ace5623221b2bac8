package pgqueue_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// TestClaimPlanWithoutStatistics plans sql/claim.sql on tables whose
// statistics do not describe their rows: bulk-loaded and never analysed,
// analysed before a TRUNCATE and a new load (TRUNCATE keeps pg_statistic
// and resets reltuples to -1), and holding dead versions of every job.
// Whatever the estimate, the claim must read jobs_fetch_idx in order: a
// bitmap scan of the backlog followed by a sort of all of it (LockRows sits
// between LIMIT and the sort, so the sort is never bounded) took 92 ms for
// a 50,000-job backlog in issue 15, where the index scan took about 1 ms
// (docs/dev/measurements/2026-12-03-claim-plan-without-statistics.md). Custom and
// generic plans both, since pgx's cached statements switch to a generic
// plan after five executions and its exec mode never does.
func TestClaimPlanWithoutStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const jobs = 5000

	enqueue := func(t *testing.T, c *pgqueue.Client, n int, runAt bool) {
		t.Helper()
		if n < pgqueue.CopyThreshold {
			t.Fatalf("%d jobs would not take the COPY path", n)
		}
		params := make([]pgqueue.EnqueueManyParams, n)
		past := time.Now().Add(-time.Hour)
		for i := range params {
			opts := &pgqueue.EnqueueOpts{Priority: int16(i % 4)}
			if runAt {
				opts.RunAt = past.Add(time.Duration(i%997) * time.Second)
			}
			params[i] = pgqueue.EnqueueManyParams{Args: noteArgs{N: i}, Opts: opts}
		}
		_, err := c.EnqueueMany(ctx, params)
		must(t, err)
	}
	exec := func(t *testing.T, pool *pgxpool.Pool, sql string) {
		t.Helper()
		_, err := pool.Exec(ctx, sql)
		must(t, err)
	}

	scenarios := []struct {
		name  string
		setup func(t *testing.T, pool *pgxpool.Pool, c *pgqueue.Client)
	}{
		{"NeverAnalysed", func(t *testing.T, pool *pgxpool.Pool, c *pgqueue.Client) {
			enqueue(t, c, jobs, false)
		}},
		{"AnalysedBeforeTruncate", func(t *testing.T, pool *pgxpool.Pool, c *pgqueue.Client) {
			// The statistics say one job in 200 is available; then the
			// table is emptied and loaded with a backlog.
			enqueue(t, c, 2000, false)
			exec(t, pool, `UPDATE pgqueue.jobs SET state = 'completed', finalized_at = now() WHERE id % 200 <> 0`)
			exec(t, pool, `ANALYZE pgqueue.jobs`)
			exec(t, pool, `TRUNCATE pgqueue.jobs`)
			enqueue(t, c, jobs, false)
		}},
		{"DeadTuplesNeverAnalysed", func(t *testing.T, pool *pgxpool.Pool, c *pgqueue.Client) {
			// Scheduled with run_at spread over the past, then made
			// available as the scheduler does: every job has a dead version.
			enqueue(t, c, jobs, true)
			exec(t, pool, `UPDATE pgqueue.jobs SET state = 'available' WHERE state = 'scheduled' AND run_at <= now()`)
		}},
	}
	file, err := os.ReadFile("internal/jobsql/sql/claim.sql")
	must(t, err)
	claim := strings.ReplaceAll(string(file), "{{schema}}", pgx.Identifier{pgqueue.SchemaDefault}.Sanitize())

	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			pool := newPool(t)
			// No autovacuum run may analyse the table during the test.
			exec(t, pool, `ALTER TABLE pgqueue.jobs SET (autovacuum_enabled = false)`)
			sc.setup(t, pool, newClient(t, pool, nil))
			var reltuples float64
			must(t, pool.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = 'pgqueue.jobs'::regclass`).Scan(&reltuples))
			if reltuples != -1 {
				t.Fatalf("reltuples %v: the table was vacuumed or analysed since its load", reltuples)
			}
			conn, err := pool.Acquire(ctx)
			must(t, err)
			defer conn.Release()
			_, err = conn.Exec(ctx, "PREPARE claim_plan AS\n"+claim)
			must(t, err)
			for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
				_, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode)
				must(t, err)
				for _, limit := range []int{1, 10, 1000} {
					rows, err := conn.Query(ctx, fmt.Sprintf("EXPLAIN EXECUTE claim_plan('default', %d, 30000000, 'plan-test')", limit), pgx.QueryExecModeSimpleProtocol)
					must(t, err)
					plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
					must(t, err)
					text := strings.Join(plan, "\n")
					// The available jobs' branch; the gates' branches sort
					// a gate's few rows and merge two limited sets.
					avail := cteOf(text, "avail")
					if !strings.Contains(avail, "Index Scan using jobs_fetch_idx") || strings.Contains(avail, "Sort") ||
						strings.Contains(avail, "Bitmap Index Scan on jobs_fetch_idx") || strings.Contains(avail, "Bitmap Index Scan on jobs_available_id_idx") {
						t.Errorf("%s, limit %d: the claim does not read jobs_fetch_idx in order:\n%s", mode, limit, text)
					}
				}
			}
		})
	}
}

// cteOf returns the lines of plan under "CTE name", up to the next CTE.
func cteOf(plan, name string) string {
	_, after, ok := strings.Cut(plan, "CTE "+name+"\n")
	if !ok {
		return ""
	}
	var b strings.Builder
	for _, line := range strings.Split(after, "\n") {
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "CTE ") && !strings.HasPrefix(t, "CTE Scan") {
			break
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
