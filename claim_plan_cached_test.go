package pgqueue_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/internal/producer"
)

// TestClaimPlanCachedOnSmallTable claims, as a producer does, on an empty
// jobs table until PostgreSQL keeps a generic plan of the prepared claim
// on the connection, then fills the table without an ANALYZE and reads
// the plan kept. Planned on an empty table, the claim's update found its
// rows by reading the whole table, and kept doing so as the table grew:
// in the first minute of a steady run at 2,000 jobs/s, claims took 35 ms
// and then 220 ms until the first autoanalyze replaced the plan. Both
// ways of claiming: with the claim lock (sql/claim_lock.sql) and without
// (sql/claim_settings.sql).
func TestClaimPlanCachedOnSmallTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, err := jobsql.Load(pgqueue.SchemaDefault)
	must(t, err)

	for _, locked := range []bool{false, true} {
		t.Run(fmt.Sprintf("locked=%v", locked), func(t *testing.T) {
			t.Parallel()
			pool := newPool(t) // an empty table of its own
			exec := func(sql string, args ...any) {
				t.Helper()
				_, err := pool.Exec(ctx, sql, args...)
				must(t, err)
			}
			// No autovacuum run may analyse the table during the test: an
			// ANALYZE replaces the cached plans.
			exec(`ALTER TABLE pgqueue.jobs SET (autovacuum_enabled = false)`)
			// One connection: every claim prepares and plans on it.
			cfg := pool.Config().Copy()
			cfg.MaxConns, cfg.MinConns = 1, 0
			single, err := pgxpool.NewWithConfig(ctx, cfg)
			must(t, err)
			defer single.Close()
			claimer := &producer.Claimer{Pool: single, Queries: q, Base: ctx, JobLease: time.Minute,
				ClientID: "plan-test", Schema: pgqueue.SchemaDefault, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			queue := fmt.Sprintf("cached-%v", locked)
			// A claim that finds nothing on an empty queue still runs the
			// statement; PostgreSQL keeps a generic plan from the sixth.
			for range 10 {
				jobs, _, err := claimer.Claim(queue, 10, false, locked)
				must(t, err)
				if len(jobs) != 0 {
					t.Fatalf("claimed %d jobs of an empty queue", len(jobs))
				}
			}
			// The table grows, unanalysed: jobs of another queue.
			exec(`INSERT INTO pgqueue.jobs (queue, kind, args) SELECT 'elsewhere', 'plan_test', '{}' FROM generate_series(1, 20000)`)
			exec(`INSERT INTO pgqueue.jobs (queue, kind, args) SELECT $1, 'plan_test', '{}' FROM generate_series(1, 5)`, queue)

			conn, err := single.Acquire(ctx)
			must(t, err)
			var name string
			var generic int64
			must(t, conn.QueryRow(ctx, `SELECT name, generic_plans FROM pg_prepared_statements WHERE statement = $1`,
				q.Claim).Scan(&name, &generic))
			if generic == 0 {
				conn.Release()
				t.Fatalf("the claim %s was never run with a generic plan: the test does not test the plan kept", name)
			}
			// queue is one of this test's two names: a literal needs no quoting.
			stmt := fmt.Sprintf("EXECUTE %s('%s', 10, 60000000, 'plan-test')", pgx.Identifier{name}.Sanitize(), queue)
			var out []byte
			must(t, conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+stmt, pgx.QueryExecModeSimpleProtocol).Scan(&out))
			if parsePlan(t, out).find(func(n *planNode) bool { return n.NodeType == "Seq Scan" && n.Relation == "jobs" }) != nil {
				t.Errorf("the claim's plan kept on the connection reads all of jobs:\n%s", explainText(t, conn, stmt))
			}
			conn.Release()
			// And the claim itself, through that plan, takes the jobs.
			jobs, _, err := claimer.Claim(queue, 10, false, locked)
			must(t, err)
			if len(jobs) != 5 {
				t.Fatalf("claimed %d jobs, want 5", len(jobs))
			}
		})
	}
}
