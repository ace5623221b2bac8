package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// workflowBundle is a client that is not started, on a database of its
// own: the tests claim and complete jobs themselves, one step at a time.
type workflowBundle struct {
	pool   *pgxpool.Pool
	client *pgqueue.Client
}

func setupWorkflow(t *testing.T) *workflowBundle {
	t.Helper()
	pool := newPool(t)
	return &workflowBundle{pool: pool, client: newClient(t, pool, nil)}
}

// states returns the state of each of ids, in order.
func (b *workflowBundle) states(t *testing.T, ids ...int64) []string {
	t.Helper()
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = readJob(t, b.pool, id).state
	}
	return out
}

// wantStates fails unless ids are in the states want, in order.
func (b *workflowBundle) wantStates(t *testing.T, ids []int64, want ...string) {
	t.Helper()
	if got := b.states(t, ids...); !slices.Equal(got, want) {
		t.Fatalf("states of %v: %v, want %v", ids, got, want)
	}
}

// claim claims every available job of the default queue.
func (b *workflowBundle) claim(t *testing.T) []*pgqueue.JobRow {
	t.Helper()
	jobs, err := pgqueue.Claim(context.Background(), b.client, pgqueue.QueueDefault, 1000)
	must(t, err)
	return jobs
}

// claimIDs claims every available job and returns their ids, sorted.
func (b *workflowBundle) claimIDs(t *testing.T) ([]*pgqueue.JobRow, []int64) {
	t.Helper()
	jobs := b.claim(t)
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	slices.Sort(ids)
	return jobs, ids
}

func (b *workflowBundle) complete(t *testing.T, jobs ...*pgqueue.JobRow) {
	t.Helper()
	n, err := pgqueue.Complete(context.Background(), b.client, jobs)
	must(t, err)
	if n != len(jobs) {
		t.Fatalf("completed %d of %d jobs", n, len(jobs))
	}
}

// dependent returns params of one noteArgs job depending on deps.
func dependent(n int, deps ...pgqueue.Dependency) pgqueue.EnqueueManyParams {
	return pgqueue.EnqueueManyParams{Args: noteArgs{N: n}, Opts: &pgqueue.EnqueueOpts{DependsOn: deps}}
}

// parentsNotIn counts the parents of job (its edges and its gate) whose
// committed state is none of states. Called by a handler, it checks that
// the job started only once its parents had ended so: the claim committed
// before the handler ran, so any parent whose end the claim saw has
// committed too. Comparing attempted_at with the parents' finalized_at
// would not do: both are transaction starts, and a claim's transaction
// can begin before a completion that commits ahead of the claim's
// snapshot.
func parentsNotIn(t *testing.T, pool *pgxpool.Pool, job int64, states ...string) int {
	var n int
	if err := pool.QueryRow(context.Background(), `
		SELECT count(*) FROM pgqueue.job_edges e JOIN pgqueue.jobs p ON p.id = e.parent_id
		WHERE e.child_id = $1 AND p.state <> ALL ($2)`, job, states).Scan(&n); err != nil {
		t.Error(err)
	}
	return n
}

func TestWorkflowDependencies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// A chain A → B → C in one batch: only A is claimable; each
	// completion releases the next, and nothing else.
	t.Run("ChainReleasesOneStepAtATime", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		res, err := b.client.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
			dependent(0), dependent(1, pgqueue.DependsOnIndex(0)), dependent(2, pgqueue.DependsOnIndex(1)),
		})
		must(t, err)
		if len(res.IDs) != 3 || res.Workflow == 0 {
			t.Fatalf("result %+v: want 3 ids and a workflow", res)
		}
		ids := res.IDs
		b.wantStates(t, ids, "available", "blocked", "blocked")
		for step := range 3 {
			jobs, claimed := b.claimIDs(t)
			if !slices.Equal(claimed, ids[step:step+1]) {
				t.Fatalf("step %d claimed %v, want [%d]", step, claimed, ids[step])
			}
			b.complete(t, jobs...)
		}
		b.wantStates(t, ids, "completed", "completed", "completed")
	})

	// Parents by name, and a parent already in the table by id; a child
	// of two parents waits for both.
	t.Run("ByNameAndByID", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		first, err := b.client.Enqueue(ctx, noteArgs{N: 100}, nil)
		must(t, err)
		res, err := b.client.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
			dependent(0, pgqueue.DependsOnName("a"), pgqueue.DependsOnJob(first.ID)),
			{Args: noteArgs{N: 1}, Opts: &pgqueue.EnqueueOpts{Name: "a"}},
		})
		must(t, err)
		child, a := res.IDs[0], res.IDs[1]
		b.wantStates(t, []int64{first.ID, a, child}, "available", "available", "blocked")
		jobs := b.claim(t)
		b.complete(t, jobs[0])
		b.wantStates(t, []int64{child}, "blocked")
		b.complete(t, jobs[1])
		b.wantStates(t, []int64{child}, "available")
	})

	// Enqueue (one job) with a dependency on a job in the table joins its
	// workflow; a completed parent does not hold a new child.
	t.Run("EnqueueOneJoinsParentsWorkflow", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		res, err := b.client.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{{Args: noteArgs{}, Opts: &pgqueue.EnqueueOpts{Name: "root"}}})
		must(t, err)
		child, err := b.client.Enqueue(ctx, noteArgs{N: 1}, &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnJob(res.IDs[0])}})
		must(t, err)
		if child.State != pgqueue.StateBlocked {
			t.Fatalf("child %s, want blocked", child.State)
		}
		b.complete(t, b.claim(t)...)
		late, err := b.client.Enqueue(ctx, noteArgs{N: 2}, &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnJob(res.IDs[0])}})
		must(t, err)
		if late.State != pgqueue.StateAvailable {
			t.Fatalf("child of a completed parent %s, want available", late.State)
		}
		// EnqueueOpts.Workflow adds a job without dependencies.
		extra, err := b.client.Enqueue(ctx, noteArgs{N: 3}, &pgqueue.EnqueueOpts{Workflow: res.Workflow})
		must(t, err)
		w, err := b.client.WorkflowGet(ctx, res.Workflow)
		must(t, err)
		if len(w.Jobs) != 4 || w.Jobs[3].ID != extra.ID || len(w.Edges) != 2 || w.Counts[pgqueue.StateCompleted] != 1 || w.Counts[pgqueue.StateAvailable] != 3 {
			t.Fatalf("workflow %d: %d jobs, %d edges, counts %v", w.ID, len(w.Jobs), len(w.Edges), w.Counts)
		}
	})

	// Cycles, missing parents and the limits are refused before anything
	// is written, inside a caller's transaction too.
	t.Run("RefusedWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		existing, err := b.client.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		tooMany := make([]pgqueue.Dependency, pgqueue.MaxJobDependencies+1)
		for i := range tooMany {
			tooMany[i] = pgqueue.DependsOnJob(int64(i + 1))
		}
		tooLarge := make([]pgqueue.EnqueueManyParams, pgqueue.MaxWorkflowJobs+1)
		for i := range tooLarge {
			tooLarge[i] = dependent(i)
		}
		tooLarge[1] = dependent(1, pgqueue.DependsOnIndex(0))
		cases := []struct {
			name   string
			params []pgqueue.EnqueueManyParams
			want   error
		}{
			{"TooManyJobs", tooLarge, pgqueue.ErrWorkflowLimit},
			{"NoSuchWorkflow", []pgqueue.EnqueueManyParams{{Args: noteArgs{}, Opts: &pgqueue.EnqueueOpts{Workflow: 12345}}}, pgqueue.ErrWorkflowNotFound},
			{"Cycle", []pgqueue.EnqueueManyParams{
				dependent(0), dependent(1, pgqueue.DependsOnIndex(3)), dependent(2, pgqueue.DependsOnIndex(1)), dependent(3, pgqueue.DependsOnIndex(2)),
			}, pgqueue.ErrDependencyCycle},
			{"Self", []pgqueue.EnqueueManyParams{dependent(0, pgqueue.DependsOnIndex(0))}, pgqueue.ErrDependencyCycle},
			{"MissingID", []pgqueue.EnqueueManyParams{dependent(0, pgqueue.DependsOnJob(existing.ID)), dependent(1, pgqueue.DependsOnJob(existing.ID+1000))}, pgqueue.ErrDependencyNotFound},
			{"MissingIndex", []pgqueue.EnqueueManyParams{dependent(0, pgqueue.DependsOnIndex(5))}, pgqueue.ErrDependencyNotFound},
			{"MissingName", []pgqueue.EnqueueManyParams{dependent(0, pgqueue.DependsOnName("nobody"))}, pgqueue.ErrDependencyNotFound},
			{"TooManyParents", []pgqueue.EnqueueManyParams{dependent(0, tooMany...)}, pgqueue.ErrWorkflowLimit},
			{"ZeroDependency", []pgqueue.EnqueueManyParams{dependent(0), dependent(1, pgqueue.Dependency{})}, pgqueue.ErrInvalid},
			{"Unique", []pgqueue.EnqueueManyParams{dependent(0), {Args: noteArgs{}, Opts: &pgqueue.EnqueueOpts{
				DependsOn: []pgqueue.Dependency{pgqueue.DependsOnIndex(0)}, Unique: &pgqueue.UniqueOpts{ByArgs: true}}}}, pgqueue.ErrInvalid},
		}
		for _, tc := range cases {
			_, err := b.client.EnqueueMany(ctx, tc.params)
			if !errors.Is(err, tc.want) || (tc.want != pgqueue.ErrWorkflowNotFound && !errors.Is(err, pgqueue.ErrInvalid)) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			}
			// In a caller's transaction: the transaction stays usable
			// and holds nothing of the batch.
			tx, err := b.pool.Begin(ctx)
			must(t, err)
			if _, err := b.client.EnqueueManyTx(ctx, tx, tc.params); !errors.Is(err, tc.want) {
				t.Errorf("%s in a transaction: %v, want %v", tc.name, err, tc.want)
			}
			var n int
			must(t, tx.QueryRow(ctx, "SELECT (SELECT count(*) FROM pgqueue.jobs) + (SELECT count(*) FROM pgqueue.job_deps) + (SELECT count(*) FROM pgqueue.job_gates)").Scan(&n))
			must(t, tx.Rollback(ctx))
			if n != 1 {
				t.Errorf("%s: %d jobs and edges after a refused batch, want the 1 job there before", tc.name, n)
			}
		}
		if got := countJobs(t, b.pool, "has_children"); got != 0 {
			t.Fatalf("%d jobs marked as parents by refused batches", got)
		}
	})
}

// pending reads a job's pending_parents.
func (b *workflowBundle) pending(t *testing.T, id int64) int {
	t.Helper()
	var n *int
	must(t, b.pool.QueryRow(context.Background(), "SELECT pending_parents FROM pgqueue.jobs WHERE id = $1", id).Scan(&n))
	if n == nil {
		return -1
	}
	return *n
}

// fanIn enqueues parents jobs and one child depending on them all, and
// returns their ids, the child last.
func (b *workflowBundle) fanIn(t *testing.T, parents int, policy pgqueue.ParentFailurePolicy) []int64 {
	t.Helper()
	params := make([]pgqueue.EnqueueManyParams, parents+1)
	deps := make([]pgqueue.Dependency, parents)
	for i := range parents {
		params[i] = dependent(i)
		deps[i] = pgqueue.DependsOnIndex(i).OnFailure(policy)
	}
	params[parents] = dependent(parents, deps...)
	res, err := b.client.EnqueueMany(context.Background(), params)
	must(t, err)
	return res.IDs
}

// TestWorkflowFencedRelease checks that only a parent's fenced completion
// releases its children, in the completion's own statement and
// transaction, and that each parent counts once.
func TestWorkflowFencedRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// A completion under a fence the job no longer has is refused, and
	// releases nothing: through complete_many.sql (a batch of
	// completions), complete_one.sql (a batch of one) and finish.sql (a
	// mixed batch).
	t.Run("StaleCompletionReleasesNothing", func(t *testing.T) {
		t.Parallel()
		for _, batch := range []string{"completions", "one", "mixed"} {
			mixed := batch == "mixed"
			b := setupWorkflow(t)
			ids := b.fanIn(t, 2, "")
			jobs := b.claim(t)
			stale := make([]*pgqueue.JobRow, len(jobs))
			ops := make([]string, len(jobs))
			for i, j := range jobs {
				// The job was rescued and claimed again meanwhile: a new
				// fence.
				_, err := b.pool.Exec(ctx, "UPDATE pgqueue.jobs SET fence = nextval('pgqueue.fence_seq') WHERE id = $1", j.ID)
				must(t, err)
				stale[i], ops[i] = j, "complete"
			}
			if batch == "one" {
				stale, ops = stale[:1], ops[:1]
			}
			if mixed {
				other, err := b.client.Enqueue(ctx, noteArgs{N: 9}, &pgqueue.EnqueueOpts{Queue: "other"})
				must(t, err)
				o, err := pgqueue.Claim(ctx, b.client, "other", 1)
				must(t, err)
				stale, ops = append(stale, o...), append(ops, "fail")
				defer func() {
					// The batch's valid result landed: a failure, retried at once.
					if s := readJob(t, b.pool, other.ID); s.state != "available" || s.attempt != 1 {
						t.Fatalf("the valid result of the batch: %s, attempt %d", s.state, s.attempt)
					}
				}()
			}
			updated, err := pgqueue.FinishBatch(ctx, b.client, stale, ops)
			must(t, err)
			for _, id := range ids[:2] {
				if updated[id] {
					t.Fatalf("%s: stale completion of job %d landed", batch, id)
				}
			}
			b.wantStates(t, ids, "running", "running", "blocked")
			if n := b.pending(t, ids[2]); n != 2 {
				t.Fatalf("%s: child waits for %d parents after stale completions, want 2", batch, n)
			}
		}
	})

	// A parent whose lease expired is rescued and runs again: its old
	// holder's late completion is refused, its new holder's completes it,
	// and a repeat of that completion is refused too. The child of two
	// parents counts the rescued one once: it still waits for the other.
	t.Run("RescuedAndRerunParentReleasesOnce", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "the rescuer taking over a parent")
		b := setupWorkflow(t)
		ids := b.fanIn(t, 2, "")
		p, q, child := ids[0], ids[1], ids[2]
		dead := claimAsDeadWorker(t, b.pool, p)
		startPruner(t, b.pool, &pgqueue.Config{RescueInterval: 50 * time.Millisecond,
			RetryPolicy: pgqueue.RetryPolicyFunc(func(int, error) time.Duration { return 0 })})
		waitFor(t, "the parent rescued", func() bool { return readJob(t, b.pool, p).state != "running" })
		b.wantStates(t, []int64{child}, "blocked")

		late := &pgqueue.JobRow{ID: p, Fence: dead, Queue: pgqueue.QueueDefault, Kind: "note"}
		if took, err := pgqueue.Finish(ctx, b.client, late, "complete", 0); err != nil || took {
			t.Fatalf("the dead holder's late completion: took %v, %v", took, err)
		}
		waitState(t, b.pool, p, "available")
		var rerun, other *pgqueue.JobRow
		for _, j := range b.claim(t) {
			switch j.ID {
			case p:
				rerun = j
			case q:
				other = j
			}
		}
		if rerun == nil || other == nil {
			t.Fatal("the parents were not claimed")
		}
		b.complete(t, rerun)
		if took, err := pgqueue.Finish(ctx, b.client, rerun, "complete", 0); err != nil || took {
			t.Fatalf("a repeated completion: took %v, %v", took, err)
		}
		b.wantStates(t, []int64{p, child}, "completed", "blocked")
		if n := b.pending(t, child); n != 1 {
			t.Fatalf("child waits for %d parents, want 1", n)
		}
		b.complete(t, other)
		b.wantStates(t, []int64{child}, "available")
	})

	// A parent that completed, retried by hand and completed again, counts
	// once for its child: the child still waits for its other parent.
	t.Run("RetriedCompletedParentCountsOnce", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		ids := b.fanIn(t, 2, "")
		p, child := ids[0], ids[2]
		for range 2 {
			var job *pgqueue.JobRow
			for _, j := range b.claim(t) {
				if j.ID == p {
					job = j
				}
			}
			b.complete(t, job)
			_, err := b.client.JobRetry(ctx, p)
			must(t, err)
		}
		b.wantStates(t, []int64{child}, "blocked")
		if n := b.pending(t, child); n != 1 {
			t.Fatalf("child waits for %d parents, want 1", n)
		}
	})

	// CompleteTx releases the children in the caller's transaction: not at
	// all if it rolls back, at its commit otherwise; a stale CompleteTx
	// releases nothing.
	t.Run("CompleteTxReleasesInTheCallersTransaction", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		ids := b.fanIn(t, 1, "")
		parent, child := ids[0], ids[1]
		jobs := b.claim(t)

		tx, err := b.pool.Begin(ctx)
		must(t, err)
		must(t, b.client.CompleteTx(ctx, tx, jobs[0]))
		var inTx string
		must(t, tx.QueryRow(ctx, "SELECT pgqueue.job_state(state, gate_id, queue) FROM pgqueue.jobs WHERE id = $1", child).Scan(&inTx))
		b.wantStates(t, []int64{child}, "blocked") // not committed
		must(t, tx.Rollback(ctx))
		if inTx != "available" {
			t.Fatalf("child %s inside the completing transaction, want available", inTx)
		}
		b.wantStates(t, []int64{parent, child}, "running", "blocked")

		stale := *jobs[0]
		stale.Fence--
		tx, err = b.pool.Begin(ctx)
		must(t, err)
		if err := b.client.CompleteTx(ctx, tx, &stale); !errors.Is(err, pgqueue.ErrJobLeaseLost) {
			t.Fatalf("stale CompleteTx: %v", err)
		}
		must(t, tx.Commit(ctx))
		b.wantStates(t, []int64{parent, child}, "running", "blocked")

		tx, err = b.pool.Begin(ctx)
		must(t, err)
		must(t, b.client.CompleteTx(ctx, tx, jobs[0]))
		must(t, tx.Commit(ctx))
		b.wantStates(t, []int64{parent, child}, "completed", "available")
	})

	// A child inserted while its parent's completion waits for the
	// child's insert (which locked the parent) is released by that
	// completion: the completion reads the edges committed while it
	// waited.
	t.Run("CompletionWaitingForAnInsertSeesItsEdges", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		parent, err := b.client.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		jobs := b.claim(t)
		tx, err := b.pool.Begin(ctx)
		must(t, err)
		res, err := b.client.EnqueueManyTx(ctx, tx, []pgqueue.EnqueueManyParams{dependent(1, pgqueue.DependsOnJob(parent.ID))})
		must(t, err)
		done := make(chan error, 1)
		go func() {
			_, err := pgqueue.Complete(ctx, b.client, jobs)
			done <- err
		}()
		time.Sleep(200 * time.Millisecond) // the completion waits for the parent's row
		select {
		case err := <-done:
			t.Fatalf("completion did not wait for the insert's lock: %v", err)
		default:
		}
		must(t, tx.Commit(ctx))
		must(t, <-done)
		b.wantStates(t, []int64{parent.ID, res.IDs[0]}, "completed", "available")
	})

	// The same when the completion's transaction began before the insert:
	// the child's run_at (its insert's now()) is after the completing
	// transaction's now(), yet the child is due and is released
	// available, not scheduled for the scheduler to find (TestFaultWorkflow
	// found it so, with jobs joining a running workflow).
	t.Run("CompletionBegunBeforeTheInsertReleasesAvailable", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		parent, err := b.client.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		jobs := b.claim(t)
		completing, err := b.pool.Begin(ctx) // its now() is fixed here
		must(t, err)
		defer func() { _ = completing.Rollback(ctx) }()
		time.Sleep(10 * time.Millisecond)
		tx, err := b.pool.Begin(ctx)
		must(t, err)
		res, err := b.client.EnqueueManyTx(ctx, tx, []pgqueue.EnqueueManyParams{dependent(1, pgqueue.DependsOnJob(parent.ID))})
		must(t, err)
		done := make(chan error, 1)
		go func() { done <- b.client.CompleteTx(ctx, completing, jobs[0]) }()
		time.Sleep(200 * time.Millisecond) // the completion waits for the parent's row
		must(t, tx.Commit(ctx))
		must(t, <-done)
		must(t, completing.Commit(ctx))
		b.wantStates(t, []int64{parent.ID, res.IDs[0]}, "completed", "available")
	})
}

// TestWorkflowFailurePolicy checks what a parent's discard or
// cancellation does to its dependents, by policy, and that retrying the
// parent resumes the workflow.
func TestWorkflowFailurePolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// P has three children, one per policy; the "cancel" child has two
	// children of its own, by "cancel" and "run". P is discarded.
	type family struct {
		p, cancel, run, wait, grandCancel, grandRun int64
		all                                         []int64
	}
	enqueueFamily := func(t *testing.T, b *workflowBundle) family {
		t.Helper()
		res, err := b.client.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
			{Args: noteArgs{N: 0}, Opts: &pgqueue.EnqueueOpts{Name: "p"}},
			{Args: noteArgs{N: 1}, Opts: &pgqueue.EnqueueOpts{Name: "c", DependsOn: []pgqueue.Dependency{pgqueue.DependsOnName("p")}}},
			dependent(2, pgqueue.DependsOnName("p").OnFailure(pgqueue.ParentFailureRun)),
			{Args: noteArgs{N: 3}, Opts: &pgqueue.EnqueueOpts{OnParentFailure: pgqueue.ParentFailureWait, DependsOn: []pgqueue.Dependency{pgqueue.DependsOnName("p")}}},
			dependent(4, pgqueue.DependsOnName("c").OnFailure(pgqueue.ParentFailureCancel)),
			dependent(5, pgqueue.DependsOnName("c").OnFailure(pgqueue.ParentFailureRun)),
		})
		must(t, err)
		f := family{p: res.IDs[0], cancel: res.IDs[1], run: res.IDs[2], wait: res.IDs[3], grandCancel: res.IDs[4], grandRun: res.IDs[5], all: res.IDs}
		b.wantStates(t, f.all, "available", "blocked", "blocked", "blocked", "blocked", "blocked")
		return f
	}

	// The same through dependency edges (a parent in the table, a child
	// of two parents), not gates: a discarded parent cancels its child,
	// and that child's own.
	t.Run("DiscardedParentCancelsThroughEdges", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		p, err := b.client.Enqueue(ctx, noteArgs{N: 0}, nil)
		must(t, err)
		res, err := b.client.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
			{Args: noteArgs{N: 1}, Opts: &pgqueue.EnqueueOpts{Name: "c", DependsOn: []pgqueue.Dependency{pgqueue.DependsOnJob(p.ID)}}},
			dependent(2, pgqueue.DependsOnName("c"), pgqueue.DependsOnJob(p.ID)),
		})
		must(t, err)
		var edges int
		must(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM pgqueue.job_deps").Scan(&edges))
		if edges != 3 {
			t.Fatalf("%d edges, want 3", edges)
		}
		jobs := b.claim(t)
		if took, err := pgqueue.Finish(ctx, b.client, jobs[0], "discard", 0); err != nil || !took {
			t.Fatalf("discard: %v %v", took, err)
		}
		b.wantStates(t, append([]int64{p.ID}, res.IDs...), "discarded", "cancelled", "cancelled")
	})

	t.Run("DiscardedParent", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		f := enqueueFamily(t, b)
		jobs := b.claim(t)
		if took, err := pgqueue.Finish(ctx, b.client, jobs[0], "discard", 0); err != nil || !took {
			t.Fatalf("discard: %v %v", took, err)
		}
		// cancel: cancelled, and its "cancel" child with it, its "run"
		// child released; run: released; wait: still blocked.
		b.wantStates(t, f.all, "discarded", "cancelled", "available", "blocked", "cancelled", "available")
		s := readJob(t, b.pool, f.cancel)
		if len(s.errors) != 1 || !strings.Contains(s.errors[0], "depends on was discarded or cancelled") {
			t.Fatalf("errors of the cancelled child: %q", s.errors)
		}

		// Retrying P brings back what its failure cancelled; once P
		// completes, the children waiting for it run.
		_, err := b.client.JobRetry(ctx, f.p)
		must(t, err)
		b.wantStates(t, f.all, "available", "blocked", "available", "blocked", "blocked", "available")
		var p *pgqueue.JobRow
		for _, j := range b.claim(t) {
			if j.ID == f.p {
				p = j
			}
		}
		b.complete(t, p)
		b.wantStates(t, []int64{f.cancel, f.wait, f.grandCancel}, "available", "available", "blocked")
	})

	// A parent cancelled while it waits (JobCancel of a blocked job)
	// cancels its own dependents; JobRetryMany, as the CLI and the
	// dashboard retry, resumes them, and the retried job waits for its
	// parent again.
	t.Run("CancelledBlockedJobAndRetryMany", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		f := enqueueFamily(t, b)
		_, err := b.client.JobCancel(ctx, f.cancel)
		must(t, err)
		b.wantStates(t, f.all, "available", "cancelled", "blocked", "blocked", "cancelled", "available")
		_, err = b.client.JobRetryMany(ctx, []int64{f.cancel})
		must(t, err)
		b.wantStates(t, f.all, "available", "blocked", "blocked", "blocked", "blocked", "available")
		b.complete(t, b.claim(t)...) // p and grandRun
		b.wantStates(t, f.all, "completed", "available", "available", "available", "blocked", "completed")
	})

	// A parent discarded by the rescuer (its last attempt's lease
	// expired) settles its dependents as a discard by its handler would.
	t.Run("DiscardedByTheRescuer", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "the rescuer discarding a parent")
		b := setupWorkflow(t)
		f := enqueueFamily(t, b)
		_, err := b.pool.Exec(ctx, "UPDATE pgqueue.jobs SET max_attempts = 1 WHERE id = $1", f.p)
		must(t, err)
		claimAsDeadWorker(t, b.pool, f.p)
		startPruner(t, b.pool, &pgqueue.Config{RescueInterval: 50 * time.Millisecond})
		waitState(t, b.pool, f.p, "discarded")
		b.wantStates(t, f.all, "discarded", "cancelled", "available", "blocked", "cancelled", "available")
	})

	// A child inserted after its parent failed applies its policy at once.
	t.Run("ParentFailedBeforeTheInsert", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		parent, err := b.client.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		_, err = b.client.JobCancel(ctx, parent.ID)
		must(t, err)
		res, err := b.client.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
			dependent(0, pgqueue.DependsOnJob(parent.ID)),
			dependent(1, pgqueue.DependsOnJob(parent.ID).OnFailure(pgqueue.ParentFailureRun)),
			dependent(2, pgqueue.DependsOnJob(parent.ID).OnFailure(pgqueue.ParentFailureWait)),
			dependent(3, pgqueue.DependsOnIndex(0)),
		})
		must(t, err)
		b.wantStates(t, res.IDs, "cancelled", "available", "blocked", "cancelled")
		_, err = b.client.JobRetry(ctx, parent.ID)
		must(t, err)
		b.wantStates(t, res.IDs, "blocked", "available", "blocked", "blocked")
	})

	// Deleting a parent lets its children go, and takes its edges.
	t.Run("DeletedParentReleases", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		ids := b.fanIn(t, 2, "")
		_, err := b.client.JobDelete(ctx, ids[0])
		must(t, err)
		b.wantStates(t, ids[2:], "blocked")
		_, err = b.client.JobDeleteMany(ctx, ids[1:2])
		must(t, err)
		b.wantStates(t, ids[2:], "available")
		var edges int
		must(t, b.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM pgqueue.job_edges) + (SELECT count(*) FROM pgqueue.job_gates)").Scan(&edges))
		if edges != 0 {
			t.Fatalf("%d edges left after their parents were deleted", edges)
		}
	})
}

// TestWorkflowPrune checks that the pruner deletes a workflow's edges with
// its jobs, keeps a failed parent while a job waits for its retry, and
// leaves no edge whose parent or child is gone.
func TestWorkflowPrune(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "the pruner deleting workflows")
	ctx := context.Background()
	b := setupWorkflow(t)
	res, err := b.client.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
		dependent(0), dependent(1, pgqueue.DependsOnIndex(0)), // a chain, both to complete
		dependent(2), dependent(3, pgqueue.DependsOnIndex(2).OnFailure(pgqueue.ParentFailureWait)), // a parent to discard, its child waiting
		dependent(4), dependent(5, pgqueue.DependsOnIndex(4)), // the same behind a gate: its child cancelled, then retried
	})
	must(t, err)
	ids := res.IDs
	_, err = b.client.JobCancel(ctx, ids[5])
	must(t, err)
	for range 2 {
		for _, j := range b.claim(t) {
			op := "complete"
			if j.ID == ids[2] || j.ID == ids[4] {
				op = "discard"
			}
			_, err := pgqueue.Finish(ctx, b.client, j, op, 0)
			must(t, err)
		}
	}
	_, err = b.client.JobRetry(ctx, ids[5]) // back behind its parent's closed gate
	must(t, err)
	b.wantStates(t, ids, "completed", "completed", "discarded", "blocked", "discarded", "blocked")
	old := func() {
		_, err := b.pool.Exec(ctx, "UPDATE pgqueue.jobs SET finalized_at = now() - interval '8 days' WHERE finalized_at IS NOT NULL")
		must(t, err)
	}
	old()
	startPruner(t, b.pool, &pgqueue.Config{PruneInterval: 50 * time.Millisecond})
	waitFor(t, "the chain pruned", func() bool { return countJobs(t, b.pool, "id = ANY($1)", ids[:2]) == 0 })
	time.Sleep(300 * time.Millisecond) // more runs
	if n := countJobs(t, b.pool, "id = ANY($1)", ids[2:]); n != 4 {
		t.Fatalf("%d of the discarded parents and their waiting children left, want all 4", n)
	}
	var dangling, edges int
	check := func() {
		t.Helper()
		must(t, b.pool.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM pgqueue.job_deps d
			        WHERE NOT EXISTS (SELECT 1 FROM pgqueue.jobs p WHERE p.id = d.parent_id)
			           OR NOT EXISTS (SELECT 1 FROM pgqueue.jobs c WHERE c.id = d.child_id))
			     + (SELECT count(*) FROM pgqueue.job_gates g
			        WHERE NOT EXISTS (SELECT 1 FROM pgqueue.jobs p WHERE p.id = g.parent_id)),
			       (SELECT count(*) FROM pgqueue.job_edges)`).Scan(&dangling, &edges))
	}
	check()
	if dangling != 0 || edges != 2 {
		t.Fatalf("%d edges, %d dangling; want the waiting ones only", edges, dangling)
	}
	// The waiting children are cancelled: nothing waits any more, and all go.
	_, err = b.client.JobCancelMany(ctx, []int64{ids[3], ids[5]})
	must(t, err)
	old()
	waitFor(t, "the rest pruned", func() bool { return countJobs(t, b.pool, "true") == 0 })
	check()
	if edges != 0 {
		t.Fatalf("%d edges left with no jobs", edges)
	}
	if _, err := b.client.WorkflowGet(ctx, res.Workflow); !errors.Is(err, pgqueue.ErrWorkflowNotFound) {
		t.Fatalf("WorkflowGet of a pruned workflow: %v", err)
	}
}

// TestWorkflowRun works workflows with a started client: a fan-out, then
// a fan-in whose last job reads its parents' outputs.
func TestWorkflowRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	ws := pgqueue.NewWorkers()
	got := make(chan []pgqueue.ParentOutput, 1)
	var early atomic.Int64
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
		early.Add(int64(parentsNotIn(t, pool, job.ID, "completed")))
		if job.Args.N < 0 { // the fan-in's last job
			parents, err := pgqueue.ParentOutputs(ctx)
			got <- parents
			return err
		}
		return pgqueue.RecordOutput(ctx, map[string]int{"n": job.Args.N})
	}, nil))
	b := startClient(t, pool, ws, &pgqueue.Config{Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 8}}})
	const width = 20
	params := []pgqueue.EnqueueManyParams{{Args: noteArgs{N: 0}, Opts: &pgqueue.EnqueueOpts{Name: "root"}}}
	var mid []pgqueue.Dependency
	for i := 1; i <= width; i++ {
		params = append(params, dependent(i, pgqueue.DependsOnName("root")))
		mid = append(mid, pgqueue.DependsOnIndex(i))
	}
	params = append(params, dependent(-1, mid...))
	res, err := b.client.EnqueueMany(ctx, params)
	must(t, err)
	last := res.IDs[len(res.IDs)-1]
	waitState(t, pool, last, "completed")

	parents := <-got
	if len(parents) != width {
		t.Fatalf("%d parent outputs, want %d", len(parents), width)
	}
	for i, p := range parents {
		if p.JobID != res.IDs[i+1] || p.State != pgqueue.StateCompleted || string(p.Output) != fmt.Sprintf(`{"n": %d}`, i+1) {
			t.Fatalf("parent %d: %+v (%s)", i, p, p.Output)
		}
	}
	w, err := b.client.WorkflowGet(ctx, res.Workflow)
	must(t, err)
	if !w.Done() || w.Counts[pgqueue.StateCompleted] != width+2 || len(w.Edges) != 2*width {
		t.Fatalf("workflow: done %v, counts %v, %d edges", w.Done(), w.Counts, len(w.Edges))
	}
	for _, e := range w.Edges {
		if !e.Resolved || e.OnFailure != pgqueue.ParentFailureCancel {
			t.Fatalf("edge %+v", e)
		}
	}
	// Every job started after all its parents completed.
	if n := early.Load(); n != 0 {
		t.Fatalf("%d parents had not completed when their child started", n)
	}
	if _, err := pgqueue.ParentOutputs(ctx); !errors.Is(err, pgqueue.ErrNoJobContext) {
		t.Fatalf("ParentOutputs outside a job: %v", err)
	}
}

// TestWorkflowReleaseWakesProducer works a chain with a client that
// neither listens nor polls (PollOnly, an hour's poll): each next step is
// found because the completion that released it wakes the client's own
// producer, not by a NOTIFY or a poll.
func TestWorkflowReleaseWakesProducer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	const steps = 5
	params := []pgqueue.EnqueueManyParams{dependent(0)}
	for i := 1; i < steps; i++ {
		params = append(params, dependent(i, pgqueue.DependsOnIndex(i-1)))
	}
	// Inserted before the client starts: its first claim finds the root.
	res, err := newClient(t, pool, nil).EnqueueMany(ctx, params)
	must(t, err)
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(context.Context, *pgqueue.Job[noteArgs]) error { return nil }, nil))
	startClient(t, pool, ws, &pgqueue.Config{PollOnly: true, FetchPollInterval: time.Hour, SchedulerInterval: time.Hour})
	last := res.IDs[steps-1]
	waitState(t, pool, last, "completed")
	var slowest float64
	must(t, pool.QueryRow(ctx, `
		SELECT max(extract(epoch FROM c.attempted_at - p.finalized_at))
		FROM pgqueue.job_edges d JOIN pgqueue.jobs p ON p.id = d.parent_id JOIN pgqueue.jobs c ON c.id = d.child_id
		WHERE c.id = ANY ($1)`, res.IDs).Scan(&slowest))
	// Seconds at most under the heaviest load; without the wake-up, an hour.
	if slowest > 10 {
		t.Fatalf("a step started %.1f s after its parent completed", slowest)
	}
}

// TestWorkflowBatchCallback works a batch whose jobs end in every final
// state: its callback runs once, after the last of them, and reads how
// each ended.
func TestWorkflowBatchCallback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	ws := pgqueue.NewWorkers()
	counts := make(chan map[pgqueue.JobState]int, 2)
	early := make(chan int, 2)
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
		switch job.Args.N {
		case -1: // the callback
			early <- parentsNotIn(t, pool, job.ID, "completed", "discarded", "cancelled")
			c, err := pgqueue.ParentCounts(ctx)
			counts <- c
			return err
		case 1:
			return errors.New("fails for good")
		case 2:
			return pgqueue.JobCancel(errors.New("not wanted"))
		}
		return nil
	}, nil))
	b := startClient(t, pool, ws, nil)
	jobs := []pgqueue.EnqueueManyParams{
		dependent(0), {Args: noteArgs{N: 1}, Opts: &pgqueue.EnqueueOpts{MaxAttempts: 1}}, dependent(2),
		dependent(3, pgqueue.DependsOnIndex(2)), // cancelled with its parent
		dependent(4, pgqueue.DependsOnIndex(0)),
	}
	res, err := b.client.EnqueueBatch(ctx, jobs, pgqueue.EnqueueManyParams{Args: noteArgs{N: -1}})
	must(t, err)
	callback := res.IDs[len(res.IDs)-1]
	waitState(t, pool, callback, "completed")
	got := <-counts
	want := map[pgqueue.JobState]int{pgqueue.StateCompleted: 2, pgqueue.StateDiscarded: 1, pgqueue.StateCancelled: 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("callback saw %v, want %v", got, want)
	}
	if s := readJob(t, pool, callback); s.attempt != 1 {
		t.Fatalf("callback ran %d times", s.attempt)
	}
	if n := <-early; n != 0 {
		t.Fatalf("the callback started before %d jobs of its batch finished", n)
	}
	var parents int
	must(t, pool.QueryRow(ctx, `SELECT count(*) FROM pgqueue.job_edges WHERE child_id = $1 AND parent_id = ANY ($2)`,
		callback, res.IDs[:len(jobs)]).Scan(&parents))
	if parents != len(jobs) {
		t.Fatalf("the callback has %d of its batch's %d jobs as parents", parents, len(jobs))
	}
	if _, err := b.client.EnqueueBatch(ctx, nil, pgqueue.EnqueueManyParams{Args: noteArgs{}}); !errors.Is(err, pgqueue.ErrInvalid) {
		t.Fatalf("an empty batch: %v", err)
	}
}

// A blocked job is not running: JobRetry returns it as it is, and
// JobRetryMany counts it unchanged.
func TestWorkflowRetryOfABlockedJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupWorkflow(t)
	ids := b.fanIn(t, 1, "")
	job, err := b.client.JobRetry(ctx, ids[1])
	must(t, err)
	if job.State != pgqueue.StateBlocked {
		t.Fatalf("JobRetry of a blocked job: %s", job.State)
	}
	res, err := b.client.JobRetryMany(ctx, ids[1:])
	must(t, err)
	if !slices.Equal(res.Unchanged, ids[1:]) || len(res.Running) != 0 {
		t.Fatalf("JobRetryMany of a blocked job: %+v", res)
	}
}
