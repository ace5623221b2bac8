package pgqueue_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// explained is a connection on b's database that logs, as notices, the
// plan of every statement it runs and of every statement those run inside
// functions, with the rows each node returned (auto_explain). It skips
// the test on a server without auto_explain.
type explained struct {
	conn *pgx.Conn
	mu   sync.Mutex
	log  []string
}

func newExplained(t *testing.T, b *workflowBundle) *explained {
	t.Helper()
	return newExplainedOn(t, b.pool)
}

// newExplainedOn is newExplained on a connection of pool's database.
func newExplainedOn(t *testing.T, pool *pgxpool.Pool) *explained {
	t.Helper()
	ctx := context.Background()
	e := &explained{}
	cfg := pool.Config().ConnConfig.Copy()
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.log = append(e.log, n.Message)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	must(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, "LOAD 'auto_explain'"); err != nil {
		t.Skipf("auto_explain cannot be loaded on this server: %v", err)
	}
	_, err = conn.Exec(ctx, `SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on;
		SET auto_explain.log_analyze = on; SET auto_explain.log_timing = off;
		SET auto_explain.log_level = notice; SET client_min_messages = notice`)
	must(t, err)
	e.conn = conn
	return e
}

// actualRows matches a plan node's row count and loops, as auto_explain
// writes them without timing.
var actualRows = regexp.MustCompile(`actual rows=(\d+) loops=(\d+)`)

// run runs sql in a transaction it rolls back and returns the plans
// logged meanwhile and the rows all their nodes returned, in sum: a
// measure of the work done that no page layout changes.
func (e *explained) run(t *testing.T, sql string, args ...any) (plans string, rows int64) {
	t.Helper()
	ctx := context.Background()
	tx, err := e.conn.Begin(ctx)
	must(t, err)
	defer tx.Rollback(ctx)
	return e.plans(t, tx, sql, args)
}

// read is run for a statement that writes nothing, run outside a
// transaction: a SELECT's unnamed portal lives, and its plan is logged,
// only when it is dropped, which in a transaction block comes at the next
// statement, not at the end of this one.
func (e *explained) read(t *testing.T, sql string, args ...any) (plans string, rows int64) {
	t.Helper()
	return e.plans(t, e.conn, sql, args)
}

// plans runs sql on q and returns what run and read do.
func (e *explained) plans(t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, args []any) (plans string, rows int64) {
	t.Helper()
	e.mu.Lock()
	e.log = e.log[:0]
	e.mu.Unlock()
	r, err := q.Query(context.Background(), sql, append([]any{pgx.QueryExecModeExec}, args...)...)
	must(t, err)
	r.Close()
	must(t, r.Err())
	e.mu.Lock()
	plans = strings.Join(e.log, "\n")
	e.mu.Unlock()
	return plans, rowsReturned(plans)
}

// rowsReturned sums the rows all nodes of plans returned.
func rowsReturned(plans string) (rows int64) {
	for _, m := range actualRows.FindAllStringSubmatch(plans, -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		loops, _ := strconv.ParseInt(m[2], 10, 64)
		rows += n * loops
	}
	return rows
}

// complete completes the claimed job j, as the completer does, in a
// transaction it rolls back.
func (e *explained) complete(t *testing.T, b *workflowBundle, j *pgqueue.JobRow) (string, int64) {
	t.Helper()
	return e.run(t, pgqueue.CompleteManySQL(b.client), fmt.Sprintf("{%d}", j.ID), fmt.Sprintf("{%d}", j.Fence))
}

// fill inserts n completed jobs of another workflow, and n resolved edges
// between them, so that the tables compared hold as many rows and are
// planned alike: only the workflow measured differs.
func fill(t *testing.T, b *workflowBundle, n int) {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), `
		WITH j AS (
			INSERT INTO pgqueue.jobs (queue, kind, state, attempt, fence, attempted_at, finalized_at, has_children, workflow_id)
			SELECT 'default', 'filler', 'completed', 1, nextval('pgqueue.fence_seq'), now(), now(), true, 0
			FROM generate_series(1, $1) RETURNING id
		)
		INSERT INTO pgqueue.job_deps (parent_id, child_id, resolved)
		SELECT id, id + 1, true FROM j`, n)
	must(t, err)
}

// TestWorkflowPlans checks what workflows cost the statements that run
// for every job, counting the rows each plan node returns (auto_explain,
// nested statements included): a claim reads no blocked job, however
// many wait, and completing a parent does the same work in a workflow of
// 5,000 jobs as in one of 50, through indexes.
func TestWorkflowPlans(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "workflows of 5,000 jobs")
	ctx := context.Background()
	const small, large = 50, 5000

	claim := func(t *testing.T, b *workflowBundle) (string, int64) {
		t.Helper()
		return newExplained(t, b).run(t, pgqueue.ClaimSQL(b.client), pgqueue.QueueDefault, 10, 30_000_000, "plan-test")
	}

	t.Run("ClaimReadsNoBlockedJob", func(t *testing.T) {
		t.Parallel()
		free := setupWorkflow(t)
		_, err := free.client.EnqueueMany(ctx, noteParams(100))
		must(t, err)
		_, before := claim(t, free)

		// A fan-out of 5,000 children waiting on one parent, in the same
		// queue, with an earlier priority than every available job.
		b := setupWorkflow(t)
		params := make([]pgqueue.EnqueueManyParams, large+1)
		params[0] = pgqueue.EnqueueManyParams{Args: noteArgs{}, Opts: &pgqueue.EnqueueOpts{Name: "root", Queue: "elsewhere"}}
		for i := 1; i <= large; i++ {
			params[i] = pgqueue.EnqueueManyParams{Args: noteArgs{N: i}, Opts: &pgqueue.EnqueueOpts{Priority: -1, DependsOn: []pgqueue.Dependency{pgqueue.DependsOnName("root")}}}
		}
		_, err = b.client.EnqueueMany(ctx, params)
		must(t, err)
		if n := countJobs(t, b.pool, "state = 'blocked'"); n != large {
			t.Fatalf("%d blocked jobs, want %d", n, large)
		}
		_, err = b.client.EnqueueMany(ctx, noteParams(100))
		must(t, err)
		_, err = b.pool.Exec(ctx, "ANALYZE pgqueue.jobs")
		must(t, err)
		plan, after := claim(t, b)
		if !strings.Contains(plan, "Index Scan using jobs_fetch_idx") {
			t.Fatalf("the claim does not read jobs_fetch_idx:\n%s", plan)
		}
		if after != before {
			t.Fatalf("a claim of 10 jobs: %d rows through its plan with %d blocked jobs in its queue, %d without:\n%s", after, large, before, plan)
		}
	})

	// The children of an open gate are claimed from blocked, ahead of
	// available jobs of a later priority, and a claim of 10 reads as many
	// rows whether the gate holds 50 children or 5,000.
	t.Run("ClaimFromAnOpenGate", func(t *testing.T) {
		t.Parallel()
		var rows [2]int64
		var plans [2]string
		for k, n := range []int{small, large} {
			b := setupWorkflow(t)
			params := make([]pgqueue.EnqueueManyParams, n+1)
			params[0] = pgqueue.EnqueueManyParams{Args: noteArgs{}, Opts: &pgqueue.EnqueueOpts{Name: "root", Queue: "elsewhere"}}
			for i := 1; i <= n; i++ {
				params[i] = pgqueue.EnqueueManyParams{Args: noteArgs{N: i}, Opts: &pgqueue.EnqueueOpts{Priority: -1, DependsOn: []pgqueue.Dependency{pgqueue.DependsOnName("root")}}}
			}
			res, err := b.client.EnqueueMany(ctx, params)
			must(t, err)
			_, err = b.client.EnqueueMany(ctx, noteParams(100))
			must(t, err)
			root, err := pgqueue.Claim(ctx, b.client, "elsewhere", 1)
			must(t, err)
			b.complete(t, root...)
			_, err = b.pool.Exec(ctx, "ANALYZE pgqueue.jobs")
			must(t, err)
			plans[k], rows[k] = claim(t, b)
			jobs, err := pgqueue.Claim(ctx, b.client, pgqueue.QueueDefault, 3)
			must(t, err)
			for i, j := range jobs {
				// The explained claim ran in a transaction rolled back:
				// the first children are still there to take.
				if j.ID != res.IDs[1+i] {
					t.Fatalf("claimed job %d as the %dth, want the gate's child %d", j.ID, i, res.IDs[1+i])
				}
			}
		}
		if !strings.Contains(plans[1], "Index Scan using jobs_gated_idx") {
			t.Fatalf("the claim does not read jobs_gated_idx:\n%s", plans[1])
		}
		if rows[0] != rows[1] {
			t.Fatalf("a claim of 10 jobs from an open gate: %d rows through its plan with %d children, %d with %d:\n%s\n---\n%s",
				rows[1], large, rows[0], small, plans[1], plans[0])
		}
	})

	// A claim that takes a gate's last children looks for any other child
	// still waiting, walking the entries of the rows it took: each is
	// looked up in a hash of them (NOT IN, hashed), not compared with
	// every id taken (<> ALL of an array: 18 ms for a claim of 4,000).
	t.Run("ClaimThatDrainsAGateHashesTheTaken", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		b.fanOut(t, small, pgqueue.QueueDefault)
		root, err := pgqueue.Claim(ctx, b.client, pgqueue.QueueDefault, 1)
		must(t, err)
		b.complete(t, root...)
		_, err = b.pool.Exec(ctx, "ANALYZE pgqueue.jobs")
		must(t, err)
		plans, _ := newExplained(t, b).run(t, pgqueue.ClaimSQL(b.client), pgqueue.QueueDefault, small, 30_000_000, "plan-test")
		if !strings.Contains(plans, "Delete on job_gates") || !strings.Contains(plans, "(NOT (hashed SubPlan") {
			t.Fatalf("the claim of a gate's last %d children does not look the taken up in a hash:\n%s", small, plans)
		}
	})

	// The poll counts an open gate's children as work, and reads one of
	// them to know it: as many rows with 5,000 behind the gate as with
	// 50, and none of the closed gates' children.
	t.Run("PollReadsOneChildOfAnOpenGate", func(t *testing.T) {
		t.Parallel()
		var rows [2]int64
		var plans [2]string
		for k, n := range []int{small, large} {
			b := setupWorkflow(t)
			open := b.fanOut(t, n, pgqueue.QueueDefault)
			closed := b.fanOut(t, n, pgqueue.QueueDefault)
			// Both roots running, no job available: the poll must look
			// behind the gates. The first root completes.
			roots, err := pgqueue.Claim(ctx, b.client, pgqueue.QueueDefault, 2)
			must(t, err)
			if len(roots) != 2 || roots[0].ID != open[0] || roots[1].ID != closed[0] {
				t.Fatalf("claimed %v, want the two roots", roots)
			}
			b.complete(t, roots[0])
			_, err = b.pool.Exec(ctx, "ANALYZE pgqueue.jobs")
			must(t, err)
			plans[k], rows[k] = newExplained(t, b).read(t, pgqueue.PollSQL(b.client), []string{pgqueue.QueueDefault}, "pgqueue:leader")
		}
		if !strings.Contains(plans[1], "jobs_gated_idx") {
			t.Fatalf("the poll does not read jobs_gated_idx:\n%s", plans[1])
		}
		if rows[0] != rows[1] {
			t.Fatalf("a poll with an open gate: %d rows through its plan with %d children, %d with %d:\n%s\n---\n%s",
				rows[1], large, rows[0], small, plans[1], plans[0])
		}
	})

	// Each shape at two sizes: the cost of completing one parent.
	shapes := []struct {
		name string
		// params returns a workflow of about n jobs.
		params func(n int) []pgqueue.EnqueueManyParams
		// probe is the position of the parent completed: one with as
		// many children at either size, lying as close together.
		probe func(n int) int
		// wants are what the plans of the completion must show: edges
		// resolved and children written through primary keys, or a gate
		// opened.
		wants []string
	}{
		{"FanIn", func(n int) []pgqueue.EnqueueManyParams {
			params := make([]pgqueue.EnqueueManyParams, n+1)
			deps := make([]pgqueue.Dependency, n)
			for i := range n {
				params[i] = dependent(i)
				deps[i] = pgqueue.DependsOnIndex(i)
			}
			params[n] = dependent(n, deps...)
			return params
		}, func(int) int { return 0 }, []string{"Update on job_deps", "job_deps_pkey", "Update on jobs c", "Index Scan using jobs_pkey on jobs c"}},
		{"Chain", func(n int) []pgqueue.EnqueueManyParams {
			params := make([]pgqueue.EnqueueManyParams, n)
			params[0] = dependent(0)
			for i := 1; i < n; i++ {
				params[i] = dependent(i, pgqueue.DependsOnIndex(i-1))
			}
			return params
		}, func(int) int { return 0 }, []string{"Update on job_gates g", "job_gates_pkey"}}, // each step behind a gate
		{"Layered", layeredParams, func(n int) int { return n / 20 }, []string{"Update on job_deps", "job_deps_pkey", "Update on jobs c", "Index Scan using jobs_pkey on jobs c"}}, // mid-layer: children k-2, k-1, k below it
	}
	for _, shape := range shapes {
		t.Run("CompletionWorkFlat"+shape.name, func(t *testing.T) {
			t.Parallel()
			var rows [2]int64
			var plans [2]string
			for k, n := range []int{small, large} {
				b := setupWorkflow(t)
				fill(t, b, large-n)
				res, err := b.client.EnqueueMany(ctx, shape.params(n))
				must(t, err)
				_, err = b.pool.Exec(ctx, "ANALYZE pgqueue.jobs, pgqueue.job_deps")
				must(t, err)
				jobs, err := pgqueue.Claim(ctx, b.client, pgqueue.QueueDefault, 1000)
				must(t, err)
				i := slices.IndexFunc(jobs, func(j *pgqueue.JobRow) bool { return j.ID == res.IDs[shape.probe(n)] })
				plans[k], rows[k] = newExplained(t, b).complete(t, b, jobs[i])
			}
			if rows[0] != rows[1] {
				t.Fatalf("completing one parent: %d rows through the plans in a workflow of %d jobs, %d in one of %d:\n%s\n---\n%s",
					rows[1], large, rows[0], small, plans[1], plans[0])
			}
			for _, want := range shape.wants {
				if !strings.Contains(plans[1], want) {
					t.Errorf("no %q in the plans:\n%s", want, plans[1])
				}
			}
			if strings.Contains(plans[1], "Seq Scan") {
				t.Errorf("a sequential scan in the plans:\n%s", plans[1])
			}
		})
	}

	// A fan-out's root opens its children's gate: the same work for 499
	// children as for 4,999, none of them written.
	t.Run("FanOutReleaseIsFlat", func(t *testing.T) {
		t.Parallel()
		var rows [2]int64
		for k, n := range []int{large / 10, large} {
			b := setupWorkflow(t)
			fill(t, b, large-n)
			params := make([]pgqueue.EnqueueManyParams, n)
			params[0] = dependent(0)
			for i := 1; i < n; i++ {
				params[i] = dependent(i, pgqueue.DependsOnIndex(0))
			}
			_, err := b.client.EnqueueMany(ctx, params)
			must(t, err)
			_, err = b.pool.Exec(ctx, "ANALYZE pgqueue.jobs, pgqueue.job_deps")
			must(t, err)
			jobs := b.claim(t)
			var plan string
			plan, rows[k] = newExplained(t, b).complete(t, b, jobs[0])
			if strings.Contains(plan, "Update on jobs c") || !strings.Contains(plan, "Update on job_gates g") {
				t.Fatalf("the root's completion writes its children, or opens no gate:\n%s", plan)
			}
		}
		if rows[1] != rows[0] {
			t.Fatalf("releasing %d children: %d rows through the plans; %d children: %d", large-1, rows[1], large/10-1, rows[0])
		}
	})

	// A fan-out whose children wait on edges (ParentFailureRun keeps them
	// from a gate) is released by one statement of workflow_settle, whose
	// plans are generic (planned once, not for the batch's arrays): the
	// release must still go through the primary keys, one probe per
	// child, at 500 children as at 5,000.
	t.Run("EdgeFanOutReleaseIsLinear", func(t *testing.T) {
		t.Parallel()
		var rows [2]int64
		sizes := []int{large / 10, large}
		for k, n := range sizes {
			b := setupWorkflow(t)
			fill(t, b, large-n)
			params := make([]pgqueue.EnqueueManyParams, n)
			params[0] = dependent(0)
			for i := 1; i < n; i++ {
				params[i] = dependent(i, pgqueue.DependsOnIndex(0).OnFailure(pgqueue.ParentFailureRun))
			}
			_, err := b.client.EnqueueMany(ctx, params)
			must(t, err)
			_, err = b.pool.Exec(ctx, "ANALYZE pgqueue.jobs, pgqueue.job_deps")
			must(t, err)
			jobs := b.claim(t)
			var plan string
			plan, rows[k] = newExplained(t, b).complete(t, b, jobs[0])
			for _, want := range []string{"Update on job_deps d", "job_deps_pkey", "Update on jobs c", "Index Scan using jobs_pkey on jobs c"} {
				if !strings.Contains(plan, want) {
					t.Fatalf("no %q in the plans of the release of %d children:\n%s", want, n-1, plan)
				}
			}
			for _, bad := range []string{"Seq Scan", "Hash Join", "Merge Join"} {
				if strings.Contains(plan, bad) {
					t.Fatalf("%q in the plans of the release of %d children:\n%s", bad, n-1, plan)
				}
			}
			// The plans were of a rolled-back completion: complete it.
			b.complete(t, jobs[0])
			var released int
			must(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM pgqueue.jobs WHERE state = 'available'").Scan(&released))
			if released != n-1 {
				t.Fatalf("%d children available after the root completed, want %d", released, n-1)
			}
		}
		t.Logf("rows through the plans: %d for %d children, %d for %d", rows[0], sizes[0]-1, rows[1], sizes[1]-1)
		// Ten times the children: about ten times the rows (11.0 as
		// built), where a rescan per child would make it a hundred.
		if rows[1] > 20*rows[0] {
			t.Fatalf("releasing %d children: %d rows through the plans; %d children: %d", sizes[1]-1, rows[1], sizes[0]-1, rows[0])
		}
	})

	// A gated child's parent, read by ParentOutputs and ParentCounts
	// (through job_gate_edges), is probed by primary key however many jobs
	// lie before it. Joined, with statistics taken before the parent was
	// inserted (as they are until the next analyze), the planner
	// merge-joined them with the primary key read from its start.
	t.Run("ParentsReadByKey", func(t *testing.T) {
		t.Parallel()
		for _, read := range []struct {
			name string
			sql  func(*pgqueue.Client) string
		}{{"ParentOutputs", pgqueue.ParentOutputsSQL}, {"ParentCounts", pgqueue.ParentCountsSQL}} {
			var rows [2]int64
			var plans [2]string
			for k, n := range []int{small, large} {
				// A fan-out of one child, the statistics, n jobs, and
				// another such fan-out: its child is read.
				b := setupWorkflow(t)
				b.fanOut(t, 1, "")
				_, err := b.pool.Exec(ctx, "ANALYZE pgqueue.jobs, pgqueue.job_deps")
				must(t, err)
				fill(t, b, n)
				ids := b.fanOut(t, 1, "")
				r, err := b.pool.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "+read.sql(b.client), ids[1])
				must(t, err)
				lines, err := pgx.CollectRows(r, pgx.RowTo[string])
				must(t, err)
				plans[k] = strings.Join(lines, "\n")
				for _, m := range actualRows.FindAllStringSubmatch(plans[k], -1) {
					r, _ := strconv.ParseInt(m[1], 10, 64)
					loops, _ := strconv.ParseInt(m[2], 10, 64)
					rows[k] += r * loops
				}
			}
			if rows[1] > rows[0] {
				t.Fatalf("%s: %d rows through the plans after %d jobs, %d after %d:\n%s\n---\n%s",
					read.name, rows[1], large, rows[0], small, plans[1], plans[0])
			}
		}
	})

	// A batch of completions, as the completer writes them: a layer of
	// 500 parents in a workflow of 5,000 jobs. Planned for its arrays in
	// tables that small, the release read all of job_deps and hashed all
	// of jobs, for every batch.
	t.Run("BatchCompletionUsesIndexes", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		const width = large / 10
		_, err := b.client.EnqueueMany(ctx, layeredParams(large))
		must(t, err)
		_, err = b.pool.Exec(ctx, "VACUUM ANALYZE pgqueue.jobs, pgqueue.job_deps")
		must(t, err)
		jobs := b.claim(t)
		if len(jobs) != width {
			t.Fatalf("claimed %d jobs, want the first layer's %d", len(jobs), width)
		}
		ids, fences := make([]string, len(jobs)), make([]string, len(jobs))
		for i, j := range jobs {
			ids[i], fences[i] = strconv.FormatInt(j.ID, 10), strconv.FormatInt(j.Fence, 10)
		}
		plans, _ := newExplained(t, b).run(t, pgqueue.CompleteManySQL(b.client),
			"{"+strings.Join(ids, ",")+"}", "{"+strings.Join(fences, ",")+"}")
		// The statements of workflow_settle (the completion's own
		// statement joins its arrays as it likes).
		for _, plan := range strings.Split(plans, "Query Text:") {
			if !strings.Contains(plan, "Update on job_deps") && !strings.Contains(plan, "Update on jobs c") {
				continue
			}
			for _, bad := range []string{"Seq Scan", "Hash Join", "Merge Join"} {
				if strings.Contains(plan, bad) {
					t.Errorf("%q in a plan of the release of a batch of %d completions:\n%s", bad, width, plan)
				}
			}
		}
		if !strings.Contains(plans, "Index Scan using jobs_pkey on jobs c") {
			t.Errorf("the children are not found through jobs_pkey:\n%s", plans)
		}
		// The function's plans are generic, made once: planned for each
		// batch, an = ANY over the constant array of its parents had its
		// selectivity estimated element by element, and took longer to
		// plan than to run. A custom plan shows the array's elements.
		for _, table := range []string{"job_deps d", "job_gates g"} {
			found := false
			for _, plan := range strings.Split(plans, "Query Text:") {
				if !strings.Contains(plan, "Update on "+table) {
					continue
				}
				found = true
				if strings.Contains(plan, "ANY ('{") {
					t.Errorf("the update of %s is planned for the batch's parents (a custom plan):\n%s", table, plan)
				}
			}
			if !found {
				t.Errorf("no update of %s among the plans of a batch's completion:\n%s", table, plans)
			}
		}
	})

	// A queue without workflows: the completion never calls the
	// function, so it runs no statement of its.
	t.Run("CompletionWithoutWorkflowCallsNothing", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		_, err := b.client.EnqueueMany(ctx, noteParams(3))
		must(t, err)
		jobs := b.claim(t)
		plans, _ := newExplained(t, b).complete(t, b, jobs[0])
		if strings.Contains(plans, "job_deps") || strings.Count(plans, "Query Text:") != 1 {
			t.Fatalf("a completion outside workflows ran more than its statement:\n%s", plans)
		}
	})
}

// layeredParams is a workflow of n jobs in 10 layers of n/10, each job
// after the first layer depending on 3 of the layer above.
func layeredParams(n int) []pgqueue.EnqueueManyParams {
	width := n / 10
	params := make([]pgqueue.EnqueueManyParams, n)
	for i := range n {
		if i < width {
			params[i] = dependent(i)
			continue
		}
		above := (i/width - 1) * width
		params[i] = dependent(i, pgqueue.DependsOnIndex(above+i%width), pgqueue.DependsOnIndex(above+(i+1)%width),
			pgqueue.DependsOnIndex(above+(i+2)%width))
	}
	return params
}
