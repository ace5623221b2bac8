package pgqueue_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
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
