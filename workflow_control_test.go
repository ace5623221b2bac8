package pgqueue_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/jobsql"
)

type holdArgs struct{}

func (holdArgs) Kind() string { return "hold" }

// WorkflowCancel cancels what of a workflow has not ended, a page at a
// time: blocked, available, scheduled and gated jobs at once, a running
// one through its worker; jobs already ended and other workflows' jobs
// are left alone.
func TestWorkflowCancel(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := newPool(t)
	started := make(chan struct{}, 1)
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, _ *pgqueue.Job[holdArgs]) error {
		started <- struct{}{}
		<-ctx.Done()
		return context.Cause(ctx)
	}, nil))
	must(t, pgqueue.AddWorkerFunc(ws, func(context.Context, *pgqueue.Job[noteArgs]) error { return nil }, nil))
	b := startClient(t, pool, ws, nil)
	c := b.client

	parked := &pgqueue.EnqueueOpts{Queue: "parked"} // no client works it
	after := func(i int, queue string) *pgqueue.EnqueueOpts {
		return &pgqueue.EnqueueOpts{Queue: queue, DependsOn: []pgqueue.Dependency{pgqueue.DependsOnIndex(i)}}
	}
	w, err := c.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
		{Args: holdArgs{}},                         // 0: running when cancelled
		{Args: noteArgs{N: 1}, Opts: after(0, "")}, // 1: blocked behind it
		{Args: noteArgs{N: 2}, Opts: parked},       // 2: available
		{Args: noteArgs{N: 3}, Opts: &pgqueue.EnqueueOpts{Queue: "parked", RunAt: time.Now().Add(time.Hour)}}, // 3: scheduled
		{Args: noteArgs{N: 4}}, // 4: completed before
	})
	must(t, err)
	other, err := c.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{{Args: noteArgs{N: 5}, Opts: parked}, {Args: noteArgs{N: 6}, Opts: after(0, "parked")}})
	must(t, err)
	// More than a page: a root and 2,499 jobs behind its gate.
	big := make([]pgqueue.EnqueueManyParams, 2500)
	big[0] = pgqueue.EnqueueManyParams{Args: noteArgs{N: 7}, Opts: parked}
	for i := 1; i < len(big); i++ {
		big[i] = pgqueue.EnqueueManyParams{Args: noteArgs{N: 8}, Opts: after(0, "parked")}
	}
	wide, err := c.EnqueueMany(ctx, big)
	must(t, err)

	<-started
	waitFor(t, "job 4 completed", func() bool {
		j, err := c.JobGet(ctx, w.IDs[4])
		must(t, err)
		return j.State == pgqueue.StateCompleted
	})
	res, err := c.WorkflowCancel(ctx, w.Workflow)
	must(t, err)
	if !slices.Equal(res.Changed, w.IDs[1:4]) || !slices.Equal(res.CancelRequested, w.IDs[:1]) || len(res.Unchanged)+len(res.Running)+len(res.NotFound) != 0 {
		t.Fatalf("WorkflowCancel = %+v, want changed %v and cancel requested %v", res, w.IDs[1:4], w.IDs[:1])
	}
	waitFor(t, "the running job ended", func() bool {
		wf, err := c.WorkflowGet(ctx, w.Workflow)
		must(t, err)
		return wf.Done()
	})
	wf, err := c.WorkflowGet(ctx, w.Workflow)
	must(t, err)
	if wf.Counts[pgqueue.StateCancelled] != 4 || wf.Counts[pgqueue.StateCompleted] != 1 {
		t.Fatalf("after the cancel: %v, want 4 cancelled and 1 completed", wf.Counts)
	}

	res, err = c.WorkflowCancel(ctx, wide.Workflow)
	must(t, err)
	// The root's cancel cancels the jobs behind its gate in its statement:
	// the later pages find none of them left.
	if len(res.Changed) == 0 || res.Changed[0] != wide.IDs[0] || len(res.CancelRequested)+len(res.Unchanged) != 0 {
		t.Fatalf("cancelling a workflow of 2,500: %d changed (first %v), %+v", len(res.Changed), res.Changed[:min(1, len(res.Changed))], res)
	}
	if n := countJobs(t, pool, "workflow_id = $1 AND state = 'cancelled'", wide.Workflow); n != len(wide.IDs) {
		t.Fatalf("%d of %d jobs cancelled", n, len(wide.IDs))
	}

	ow, err := c.WorkflowGet(ctx, other.Workflow)
	must(t, err)
	if ow.Counts[pgqueue.StateAvailable] != 1 || ow.Counts[pgqueue.StateBlocked] != 1 {
		t.Fatalf("another workflow: %v, want it untouched", ow.Counts)
	}

	// Nothing left to cancel: an empty result.
	res, err = c.WorkflowCancel(ctx, w.Workflow)
	must(t, err)
	if len(res.Changed)+len(res.CancelRequested)+len(res.Unchanged) != 0 {
		t.Fatalf("cancelling again: %+v, want nothing", res)
	}
	for _, id := range []int64{0, -1, wide.Workflow + 1000} {
		if _, err := c.WorkflowCancel(ctx, id); !errors.Is(err, pgqueue.ErrWorkflowNotFound) {
			t.Errorf("WorkflowCancel(%d): %v, want ErrWorkflowNotFound", id, err)
		}
	}
}

// WorkflowCancel while the workflow runs: a layered workflow of 2,000
// jobs worked by 20 workers is cancelled midway. The cancel succeeds
// beside the completions that release jobs (retrying a page PostgreSQL
// failed to break a deadlock), and the workflow ends with every job final: those that ran completed after their
// parents, the rest cancelled, none left waiting.
func TestWorkflowCancelWhileRunning(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "a layered workflow of 2,000 jobs")
	ctx := t.Context()
	pool := newPool(t)
	var done atomic.Int64
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(context.Context, *pgqueue.Job[noteArgs]) error {
		done.Add(1)
		return nil
	}, nil))
	b := startClient(t, pool, ws, &pgqueue.Config{Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 20}}})
	res, err := b.client.EnqueueMany(ctx, layeredParams(2000))
	must(t, err)
	waitFor(t, "300 jobs done", func() bool { return done.Load() >= 300 })
	cancelled, err := b.client.WorkflowCancel(ctx, res.Workflow)
	must(t, err)
	if len(cancelled.Changed) == 0 {
		t.Fatalf("the cancel changed nothing: %+v (%d jobs ran)", cancelled, done.Load())
	}
	waitFor(t, "the workflow done", func() bool {
		w, err := b.client.WorkflowGet(ctx, res.Workflow)
		must(t, err)
		return w.Done()
	})
	w, err := b.client.WorkflowGet(ctx, res.Workflow)
	must(t, err)
	if w.Counts[pgqueue.StateCompleted]+w.Counts[pgqueue.StateCancelled] != len(res.IDs) || w.Counts[pgqueue.StateCancelled] == 0 {
		t.Fatalf("after the cancel: %v, want every job completed or cancelled, some cancelled", w.Counts)
	}
	for _, j := range w.Jobs {
		if j.State == pgqueue.StateCompleted {
			if n := parentsNotIn(t, pool, j.ID, "completed"); n > 0 {
				t.Errorf("job %d completed with %d parents not completed", j.ID, n)
			}
		}
	}
	// A deadlock between the cancel and a completion can happen (a batch
	// that completes jobs of two layers locks its job of the later one
	// before the children of its job of the earlier one, which the cancel
	// may hold): PostgreSQL fails one of the two, and each retries.
	var deadlocks int64
	must(t, pool.QueryRow(ctx, "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()").Scan(&deadlocks))
	t.Logf("%d completed, %d cancelled (%d by the call, %d cancel requested); %d deadlocks", w.Counts[pgqueue.StateCompleted],
		w.Counts[pgqueue.StateCancelled], len(cancelled.Changed), len(cancelled.CancelRequested), deadlocks)
}

// A page of WorkflowCancel that PostgreSQL fails to break a deadlock is
// run again. Another transaction holds the workflow's last job, the
// cancel locks the first two and waits for it, and the other transaction
// then asks for the first: a cycle. The cancel, whose deadlock_timeout
// (1 s) runs out first, is the one failed; its retry cancels all three.
func TestWorkflowCancelRetriesADeadlock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := newPool(t)
	c := newClient(t, pool, nil)
	res, err := c.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
		{Args: noteArgs{N: 1}}, {Args: noteArgs{N: 2}},
		{Args: noteArgs{N: 3}, Opts: &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnIndex(1)}}},
	})
	must(t, err)
	other, err := pool.Begin(ctx)
	must(t, err)
	defer func() { _ = other.Rollback(context.Background()) }()
	// Its own deadlock check comes after the cancel's.
	if _, err := other.Exec(ctx, "SET LOCAL deadlock_timeout = '30s'"); err != nil {
		t.Skipf("cannot raise deadlock_timeout (not a superuser?): %v", err)
	}
	_, err = other.Exec(ctx, "SELECT 1 FROM pgqueue.jobs WHERE id = $1 FOR UPDATE", res.IDs[2])
	must(t, err)

	type outcome struct {
		res *pgqueue.JobManyResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := c.WorkflowCancel(ctx, res.Workflow)
		done <- outcome{r, err}
	}()
	q, err := jobsql.Load(pgqueue.SchemaDefault)
	must(t, err)
	waitFor(t, "the cancel waiting for the last job", func() bool {
		var n int
		must(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND starts_with($1, query)`, q.JobCancelMany).Scan(&n))
		return n > 0
	})
	_, err = other.Exec(ctx, "SELECT 1 FROM pgqueue.jobs WHERE id = $1 FOR UPDATE", res.IDs[0])
	must(t, err) // granted once the cancel was failed and rolled back
	must(t, other.Rollback(ctx))

	o := <-done
	must(t, o.err)
	if !slices.Equal(o.res.Changed, res.IDs) {
		t.Fatalf("WorkflowCancel after a deadlock = %+v, want all of %v changed", o.res, res.IDs)
	}
	var deadlocks int64
	must(t, pool.QueryRow(ctx, "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()").Scan(&deadlocks))
	if deadlocks == 0 {
		t.Error("no deadlock happened: the test proves nothing")
	}
}

// WorkflowRetry retries a workflow's discarded and cancelled jobs: those
// still waiting for a parent go back to blocked, the others to available;
// jobs that did not fail are left alone, and so is another workflow.
func TestWorkflowRetry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := newPool(t)
	c := newClient(t, pool, nil) // no workers: nothing runs
	after := func(i int) *pgqueue.EnqueueOpts {
		return &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnIndex(i)}}
	}
	w, err := c.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
		{Args: noteArgs{N: 1}},                 // 0: cancelled, which cancels 1
		{Args: noteArgs{N: 2}, Opts: after(0)}, // 1
		{Args: noteArgs{N: 3}},                 // 2: cancelled alone
		{Args: noteArgs{N: 4}},                 // 3: left available
		{Args: noteArgs{N: 5}, Opts: after(3)}, // 4: left blocked
	})
	must(t, err)
	other, err := c.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{{Args: noteArgs{N: 6}}, {Args: noteArgs{N: 7}, Opts: after(0)}})
	must(t, err)
	for _, id := range []int64{w.IDs[0], w.IDs[2], other.IDs[0]} {
		_, err := c.JobCancel(ctx, id)
		must(t, err)
	}

	res, err := c.WorkflowRetry(ctx, w.Workflow)
	must(t, err)
	if !slices.Equal(res.Changed, w.IDs[:3]) || len(res.Unchanged)+len(res.Running)+len(res.CancelRequested) != 0 {
		t.Fatalf("WorkflowRetry = %+v, want %v changed", res, w.IDs[:3])
	}
	want := []pgqueue.JobState{pgqueue.StateAvailable, pgqueue.StateBlocked, pgqueue.StateAvailable, pgqueue.StateAvailable, pgqueue.StateBlocked}
	for i, id := range w.IDs {
		if j, err := c.JobGet(ctx, id); err != nil || j.State != want[i] {
			t.Errorf("job %d after the retry: %v (%v), want %s", i, j.State, err, want[i])
		}
	}
	if n := countJobs(t, pool, "workflow_id = $1 AND state = 'cancelled'", other.Workflow); n != 2 {
		t.Errorf("another workflow: %d cancelled jobs, want its 2 left so", n)
	}

	// Nothing failed any more: an empty result.
	res, err = c.WorkflowRetry(ctx, w.Workflow)
	must(t, err)
	if len(res.Changed)+len(res.Unchanged) != 0 {
		t.Fatalf("retrying again: %+v, want nothing", res)
	}
	if _, err := c.WorkflowRetry(ctx, other.Workflow+1000); !errors.Is(err, pgqueue.ErrWorkflowNotFound) {
		t.Errorf("WorkflowRetry of no workflow: %v, want ErrWorkflowNotFound", err)
	}
}
