package pgqueue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue"
)

// TestClaimFlowPlanManyKeys plans the claim of a limited queue
// (sql/claim_flow.sql, and the backlog check sent after it) on a backlog of
// 100,000 available jobs over 10,000 partition keys, with the keys first
// in claim order already at MaxRunningPerKey, after ANALYZE. The claim
// must read jobs through indexes (no Seq Scan on jobs, custom or generic
// plan) and, executed, read past the keys at their limit and a window of
// candidates, not the backlog: with a hundred thousand available jobs, a
// plan that reads them all costs each claim what the whole queue's limits
// are meant to save (issue 28).
func TestClaimFlowPlanManyKeys(t *testing.T) {
	skipInShortMode(t, "loads and analyses a 100,000-job backlog over 10,000 partition keys")
	t.Parallel()
	ctx := context.Background()
	const (
		queue   = "limited"
		backlog = 100_000
		keys    = 10_000
		running = 200
		limit   = 80
	)
	pool := newPool(t)
	c := newClient(t, pool, nil)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		must(t, err)
	}
	// History first in the heap, as a queue that has worked for a while has
	// it: finished rows are in the table, not in the indexes the claim reads.
	exec(`INSERT INTO pgqueue.jobs (queue, kind, partition_key, state, attempt, attempted_at, finalized_at)
	      SELECT $1, 'flow_plan', 'key-' || (i % $2::int), 'completed', 1, now(), now()
	      FROM generate_series(0, 19999) AS i`, queue, keys)

	// Every key has ten jobs, in claim (id) order key 0, 1, ... 9999, 0, ...
	exec(`INSERT INTO pgqueue.jobs (queue, kind, args, partition_key)
	      SELECT $1, 'flow_plan', jsonb_build_object('n', i), 'key-' || (i % $3::int)
	      FROM generate_series(0, $2::int - 1) AS i`, queue, backlog, keys)
	// The first keys in claim order each have a job running: the claim
	// passes over their waiting jobs.
	exec(`INSERT INTO pgqueue.jobs (queue, kind, partition_key, state, attempt, fence, lease_until, worker_id, attempted_at)
	      SELECT $1, 'flow_plan', 'key-' || i, 'running', 1, nextval('pgqueue.fence_seq'), now() + interval '1 hour', 'elsewhere', now()
	      FROM generate_series(0, $2::int - 1) AS i`, queue, running)
	for _, tc := range []struct {
		name   string
		limits pgqueue.QueueLimits
	}{
		{"MaxRunningPerKey", pgqueue.QueueLimits{MaxRunningPerKey: 1}},
		{"AllLimits", pgqueue.QueueLimits{MaxRunning: 1000, MaxRunningPerKey: 1,
			Rate: pgqueue.Rate{Limit: 1000, Period: time.Minute, PerKey: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			must(t, c.QueueSetLimits(ctx, queue, tc.limits))
			exec(`ANALYZE pgqueue.jobs`)
			conn, err := pool.Acquire(ctx)
			must(t, err)
			defer conn.Release()
			defer func() {
				_, _ = conn.Exec(ctx, "DEALLOCATE flow_claim; DEALLOCATE flow_backlog", pgx.QueryExecModeSimpleProtocol)
			}()
			_, err = conn.Exec(ctx, "PREPARE flow_claim AS\n"+pgqueue.ClaimFlowSQL(c))
			must(t, err)
			_, err = conn.Exec(ctx, "PREPARE flow_backlog AS\n"+pgqueue.FlowBacklogSQL(c))
			must(t, err)
			claim := fmt.Sprintf("EXECUTE flow_claim('%s', %d, 30000000, 'plan-test')", queue, limit)
			backlogCheck := fmt.Sprintf("EXECUTE flow_backlog('%s')", queue)

			// seqScans names the plans (custom, generic) of stmt that
			// read jobs with a Seq Scan.
			seqScans := func(stmt string) []string {
				var bad []string
				for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
					_, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode)
					must(t, err)
					var out []byte
					must(t, conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+stmt, pgx.QueryExecModeSimpleProtocol).Scan(&out))
					if parsePlan(t, out).find(func(n *planNode) bool { return n.NodeType == "Seq Scan" && n.Relation == "jobs" }) != nil {
						bad = append(bad, mode+":\n"+explainText(t, conn, stmt))
					}
				}
				_, err := conn.Exec(ctx, "SET plan_cache_mode = auto")
				must(t, err)
				return bad
			}
			// executed runs the claim and then stmt under the claim lock's
			// setting, as a producer does, rolled back, and returns stmt's
			// executed plan.
			executed := func(stmt string) *planNode {
				tx, err := conn.Begin(ctx)
				must(t, err)
				defer func() { _ = tx.Rollback(ctx) }()
				_, err = tx.Exec(ctx, "SELECT set_config('pgqueue.claim_locked', $1, true)", queue)
				must(t, err)
				if stmt != claim {
					_, err = tx.Exec(ctx, claim, pgx.QueryExecModeSimpleProtocol)
					must(t, err)
				}
				var out []byte
				must(t, tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+stmt, pgx.QueryExecModeSimpleProtocol).Scan(&out))
				return parsePlan(t, out)
			}

			t.Run("Claim", func(t *testing.T) {
				for _, bad := range seqScans(claim) {
					t.Errorf("Seq Scan on jobs, %s", bad)
				}
				// flow_key is inlined: called as a function, it cost a
				// SQL function call per candidate and per running job.
				if text := explainText(t, conn, "(VERBOSE) "+claim); strings.Contains(text, "flow_key(") {
					t.Errorf("flow_key is not inlined into the claim:\n%s", text)
				}
				plan := executed(claim)
				if plan.ActualRows != limit {
					t.Errorf("claimed %v jobs, want %d", plan.ActualRows, limit)
				}
				read, seq := rowsRead(plan)
				t.Logf("rows of jobs read by one claim of %d: %.0f", limit, read)
				// The keys at their limit, then a window of candidates: a
				// few hundred rows, nowhere near the backlog.
				if seq || read > backlog/20 {
					t.Errorf("one claim of %d read %.0f rows of jobs (Seq Scan: %v), with a %d-job backlog", limit, read, seq, backlog)
				}
			})
			t.Run("BacklogCheck", func(t *testing.T) {
				bad := seqScans(backlogCheck)
				read, seq := rowsRead(executed(backlogCheck))
				t.Logf("rows of jobs read by the backlog check after the claim: %.0f", read)
				// With most of the table available, an EXISTS was planned
				// as a Seq Scan that read every finished row ahead of the
				// backlog in the heap, on every claim of a limited queue;
				// the first job in claim order reads jobs_fetch_idx.
				if len(bad) > 0 || seq || read > 100 {
					t.Errorf("sql/flow_backlog.sql read %.0f rows of jobs (Seq Scan: %v); plans:\n%s", read, seq, strings.Join(bad, "\n"))
				}
			})
		})
	}
}

// rowsRead is how many rows of jobs the executed plan's scans read:
// those they returned and those their filters removed; seq says whether
// one was a Seq Scan.
func rowsRead(plan *planNode) (read float64, seq bool) {
	for _, n := range plan.find(func(n *planNode) bool { return n.Relation == "jobs" }) {
		seq = seq || n.NodeType == "Seq Scan"
		read += (n.ActualRows + n.RemovedByFilter + n.RemovedByIndexRecheck) * n.ActualLoops
	}
	return read, seq
}

// explainText is EXPLAIN of stmt on conn, as text, for a failure's message.
func explainText(t *testing.T, conn interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, stmt string) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "EXPLAIN "+stmt, pgx.QueryExecModeSimpleProtocol)
	must(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	must(t, err)
	return strings.Join(lines, "\n")
}

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan.
type planNode struct {
	NodeType              string      `json:"Node Type"`
	Relation              string      `json:"Relation Name"`
	Index                 string      `json:"Index Name"`
	ActualRows            float64     `json:"Actual Rows"`
	ActualLoops           float64     `json:"Actual Loops"`
	RemovedByFilter       float64     `json:"Rows Removed by Filter"`
	RemovedByIndexRecheck float64     `json:"Rows Removed by Index Recheck"`
	Plans                 []*planNode `json:"Plans"`
}

func parsePlan(t *testing.T, out []byte) *planNode {
	t.Helper()
	var doc []struct {
		Plan *planNode `json:"Plan"`
	}
	if err := json.Unmarshal(out, &doc); err != nil || len(doc) != 1 || doc[0].Plan == nil {
		t.Fatalf("EXPLAIN output %s: %v", strings.TrimSpace(string(out)), err)
	}
	return doc[0].Plan
}

// find returns the nodes of the plan, n and below, for which match is true.
func (n *planNode) find(match func(*planNode) bool) []*planNode {
	var out []*planNode
	if match(n) {
		out = append(out, n)
	}
	for _, c := range n.Plans {
		out = append(out, c.find(match)...)
	}
	return out
}
