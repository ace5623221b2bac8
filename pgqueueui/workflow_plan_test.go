package pgqueueui

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/pgqueuetest"
)

type planNode struct {
	NodeType     string     `json:"Node Type"`
	IndexName    string     `json:"Index Name"`
	RelationName string     `json:"Relation Name"`
	ActualRows   float64    `json:"Actual Rows"`
	ActualLoops  float64    `json:"Actual Loops"`
	Plans        []planNode `json:"Plans"`
}

// walk calls f on n and every node below it.
func (n *planNode) walk(f func(*planNode)) {
	f(n)
	for i := range n.Plans {
		n.Plans[i].walk(f)
	}
}

// explain runs sql with args under EXPLAIN ANALYZE and returns its plan,
// the rows all its nodes returned (a measure of the work done) and the
// indexes it read.
func explain(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) (rows int64, indexes string, seqScans string) {
	t.Helper()
	var out []byte
	err := pool.QueryRow(context.Background(), "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&out)
	if err != nil {
		t.Fatal(err)
	}
	var plans []struct{ Plan planNode }
	if err := json.Unmarshal(out, &plans); err != nil {
		t.Fatal(err)
	}
	var idx, seq []string
	plans[0].Plan.walk(func(n *planNode) {
		rows += int64(n.ActualRows * max(n.ActualLoops, 1))
		if n.IndexName != "" {
			idx = append(idx, n.IndexName)
		}
		if n.NodeType == "Seq Scan" {
			seq = append(seq, n.RelationName)
		}
	})
	return rows, strings.Join(idx, ","), strings.Join(seq, ",")
}

// TestWorkflowPageCost: the workflow page's statements read through
// indexes, and a page of a workflow of 5,000 jobs, first or later, does
// work in proportion to the page, not to the workflow.
func TestWorkflowPageCost(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("skipped in -short mode: a workflow of 5,000 jobs")
	}
	ctx := context.Background()
	pool := pgqueuetest.NewPool(t)
	client, err := pgqueue.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := loadQueries(pgqueue.SchemaDefault)
	if err != nil {
		t.Fatal(err)
	}
	// 50,000 finished jobs of other workflows, each with an edge, so that
	// the workflows measured are a tenth of the tables, as they are among
	// many; then a small workflow and a fan-in of 5,000.
	_, err = pool.Exec(ctx, `
		WITH j AS (
			INSERT INTO pgqueue.jobs (queue, kind, state, attempt, fence, attempted_at, finalized_at, has_children, workflow_id)
			SELECT 'default', 'filler', 'completed', 1, nextval('pgqueue.fence_seq'), now(), now(), true, i / 10 + 1000000
			FROM generate_series(1, 50000) AS i RETURNING id
		)
		INSERT INTO pgqueue.job_deps (parent_id, child_id, resolved)
		SELECT id, id + 1, true FROM j`)
	if err != nil {
		t.Fatal(err)
	}
	free := make([]pgqueue.EnqueueManyParams, 4999)
	for i := range free {
		free[i] = pgqueue.EnqueueManyParams{Args: planArgs{N: i}}
	}
	small, err := client.EnqueueBatch(ctx, free[:9], pgqueue.EnqueueManyParams{Args: planArgs{}})
	if err != nil {
		t.Fatal(err)
	}
	large, err := client.EnqueueBatch(ctx, free[:4999], pgqueue.EnqueueManyParams{Args: planArgs{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE pgqueue.jobs; ANALYZE pgqueue.job_deps"); err != nil {
		t.Fatal(err)
	}

	firstSmall, idx, seq := explain(t, pool, q.workflowPage, small.Workflow, 0, workflowPageSize+1)
	if !strings.Contains(idx, "jobs_workflow_idx") || seq != "" {
		t.Errorf("workflow page: indexes %s, seq scans %q", idx, seq)
	}
	first, _, _ := explain(t, pool, q.workflowPage, large.Workflow, 0, workflowPageSize+1)
	later, idx, seq := explain(t, pool, q.workflowPage, large.Workflow, large.IDs[3000], workflowPageSize+1)
	if seq != "" {
		t.Errorf("a later page: indexes %s, seq scans %q", idx, seq)
	}
	t.Logf("rows read: page of 10 jobs %d, first page of 5,000 %d, a later page %d", firstSmall, first, later)
	if first > 10*workflowPageSize || later > 10*workflowPageSize {
		t.Errorf("a page of %d jobs read %d (first) and %d (later) rows", workflowPageSize, first, later)
	}

	page := large.IDs[3000:3101]
	rows, idx, seq := explain(t, pool, q.workflowPageParents, page, rowDepsShown)
	if seq != "" || rows > 10*workflowPageSize {
		t.Errorf("parents of a page: %d rows, indexes %s, seq scans %q", rows, idx, seq)
	}
	if rows, idx, seq := explain(t, pool, q.workflowCounts, large.Workflow); !strings.Contains(idx, "jobs_workflow_idx") || seq != "" || rows > 3*5000 {
		t.Errorf("counts: %d rows, indexes %s, seq scans %q", rows, idx, seq)
	}
	rows, _, seq = explain(t, pool, q.recentWorkflows, recentWorkflowsShown)
	if seq != "" || rows > 20*recentWorkflowsShown {
		t.Errorf("recent workflows: %d rows, seq scans %q", rows, seq)
	}
	callback := large.IDs[len(large.IDs)-1]
	for _, sql := range []string{q.jobWorkflow, q.jobDeps} {
		args := []any{callback}
		if sql == q.jobDeps {
			args = append(args, jobDepsShown)
		}
		// Reading the callback's 4,999 edges is the point; looking up each
		// of their jobs is not.
		rows, _, seq := explain(t, pool, sql, args...)
		if seq != "" || rows > 3*5000 {
			t.Errorf("%s: %d rows, seq scans %q", strings.SplitN(sql, ":", 2)[0], rows, seq)
		}
	}
	// The page of the jobs list: at most its 50 ids, by primary key.
	rows, _, seq = explain(t, pool, q.jobsWorkflows, large.IDs[:jobsPageSize])
	if seq != "" || rows > 4*jobsPageSize {
		t.Errorf("workflows of a jobs page: %d rows, seq scans %q", rows, seq)
	}
}

type planArgs struct {
	N int `json:"n"`
}

func (planArgs) Kind() string { return "plan" }
