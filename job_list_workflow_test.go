package pgqueue_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/jobsql"
)

// JobListParams.Workflow lists a workflow's jobs, alone or with the other
// filters, page after page, and reads them through jobs_workflow_idx:
// among 20,000 jobs of other workflows, a page of one reads its rows only.
func TestJobListByWorkflow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	client := newClient(t, pool, nil)
	_, err := pool.Exec(ctx, `
		INSERT INTO pgqueue.jobs (queue, kind, state, attempt, fence, attempted_at, finalized_at, workflow_id)
		SELECT 'default', 'note', 'completed', 1, i, now(), now(), 1000000 + i % 400 FROM generate_series(1, 20000) i`)
	must(t, err)

	// Workflow a: three jobs and one after them; b: two in a row; and
	// jobs of no workflow between them.
	enqueue := func(params []pgqueue.EnqueueManyParams) *pgqueue.EnqueueManyResult {
		t.Helper()
		res, err := client.EnqueueMany(ctx, params)
		must(t, err)
		return res
	}
	dep := func(i ...int) *pgqueue.EnqueueOpts {
		opts := &pgqueue.EnqueueOpts{}
		for _, p := range i {
			opts.DependsOn = append(opts.DependsOn, pgqueue.DependsOnIndex(p))
		}
		return opts
	}
	a := enqueue([]pgqueue.EnqueueManyParams{{Args: noteArgs{N: 1}}, {Args: noteArgs{N: 2}}, {Args: noteArgs{N: 3}},
		{Args: noteArgs{N: 4}, Opts: dep(0, 1, 2)}})
	enqueue([]pgqueue.EnqueueManyParams{{Args: noteArgs{N: 5}}, {Args: noteArgs{N: 6}}})
	b := enqueue([]pgqueue.EnqueueManyParams{{Args: noteArgs{N: 7}}, {Args: noteArgs{N: 8}, Opts: dep(0)}})
	if a.Workflow == 0 || b.Workflow == 0 || a.Workflow == b.Workflow {
		t.Fatalf("workflows %d and %d", a.Workflow, b.Workflow)
	}
	_, err = pool.Exec(ctx, "ANALYZE pgqueue.jobs")
	must(t, err)

	for _, tc := range []struct {
		name   string
		params pgqueue.JobListParams
		want   []int64
	}{
		{"A", pgqueue.JobListParams{Workflow: a.Workflow, Limit: 2}, a.IDs},
		{"ADescending", pgqueue.JobListParams{Workflow: a.Workflow, Limit: 3, Descending: true},
			[]int64{a.IDs[3], a.IDs[2], a.IDs[1], a.IDs[0]}},
		{"B", pgqueue.JobListParams{Workflow: b.Workflow}, b.IDs},
		{"ABlocked", pgqueue.JobListParams{Workflow: a.Workflow, States: []pgqueue.JobState{pgqueue.StateBlocked}}, a.IDs[3:]},
		{"BByRunAt", pgqueue.JobListParams{Workflow: b.Workflow, OrderBy: pgqueue.JobListOrderRunAt}, b.IDs},
		{"NoSuchWorkflow", pgqueue.JobListParams{Workflow: b.Workflow + 1000}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := listAll(t, client, tc.params); !slices.Equal(got, tc.want) {
				t.Errorf("JobList(%+v) = %v, want %v", tc.params, got, tc.want)
			}
		})
	}

	_, err = client.JobList(ctx, &pgqueue.JobListParams{Workflow: -1})
	if !errors.Is(err, pgqueue.ErrInvalid) {
		t.Errorf("JobList with workflow -1: %v, want ErrInvalid", err)
	}

	q, err := jobsql.Load(pgqueue.SchemaDefault)
	must(t, err)
	stmt := q.JobListBy[jobsql.JobListKey{Order: "id"}]
	conn, err := pool.Acquire(ctx)
	must(t, err)
	defer conn.Release()
	var out []byte
	must(t, conn.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+stmt, pgx.QueryExecModeSimpleProtocol,
		nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, 101, nil, nil, a.Workflow).Scan(&out))
	plan := parsePlan(t, out)
	read, seq := rowsRead(plan)
	var indexes []string
	for _, n := range plan.find(func(n *planNode) bool { return n.Index != "" }) {
		indexes = append(indexes, n.Index)
	}
	if seq || read > 10 || !slices.Contains(indexes, "jobs_workflow_idx") {
		t.Errorf("a page of workflow %d read %.0f rows of jobs (Seq Scan: %v) through %v, want its 4 through jobs_workflow_idx",
			a.Workflow, read, seq, strings.Join(indexes, ", "))
	}
}
