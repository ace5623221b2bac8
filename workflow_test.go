package pgqueue_test

import (
	"context"
	"errors"
	"slices"
	"testing"

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
		w, err := b.client.WorkflowGet(ctx, res.Workflow)
		must(t, err)
		if len(w.Jobs) != 3 || len(w.Edges) != 2 || w.Counts[pgqueue.StateCompleted] != 1 || w.Counts[pgqueue.StateAvailable] != 2 {
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
		cases := []struct {
			name   string
			params []pgqueue.EnqueueManyParams
			want   error
		}{
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
			if !errors.Is(err, tc.want) || !errors.Is(err, pgqueue.ErrInvalid) {
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
			must(t, tx.QueryRow(ctx, "SELECT (SELECT count(*) FROM pgqueue.jobs) + (SELECT count(*) FROM pgqueue.job_deps)").Scan(&n))
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
