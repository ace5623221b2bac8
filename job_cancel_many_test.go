package pgqueue_test

import (
	"context"
	"slices"
	"testing"

	"github.com/pgqueue/pgqueue"
)

// JobCancelMany cancels scheduled and available jobs, requests the
// cancel of running ones without touching their claim, leaves final
// ones, and says which was which; its Tx twin changes nothing when the
// transaction rolls back.
func TestJobCancelMany(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupControl(t)
	completed := b.jobIn(t, pgqueue.StateCompleted, nil)
	scheduled := b.jobIn(t, pgqueue.StateScheduled, nil)
	running := b.jobIn(t, pgqueue.StateAvailable, nil)
	_, err := pgqueue.Claim(ctx, b.client, pgqueue.QueueDefault, 1)
	must(t, err)
	available := b.jobIn(t, pgqueue.StateAvailable, nil)
	before := readClaim(t, b.pool, running)
	ids := []int64{4711, completed, running, scheduled, available, scheduled}

	tx, err := b.pool.Begin(ctx)
	must(t, err)
	if _, err := b.client.JobCancelManyTx(ctx, tx, ids); err != nil {
		t.Fatal(err)
	}
	must(t, tx.Rollback(ctx))
	if n := countJobs(t, b.pool, "state = 'cancelled' OR cancel_requested_at IS NOT NULL"); n != 0 {
		t.Fatalf("%d jobs changed by a rolled-back JobCancelManyTx", n)
	}

	res, err := b.client.JobCancelMany(ctx, ids)
	must(t, err)
	want := &pgqueue.JobManyResult{
		Changed:         []int64{scheduled, available},
		Unchanged:       []int64{completed},
		CancelRequested: []int64{running},
		NotFound:        []int64{4711},
	}
	if !slices.Equal(res.Changed, want.Changed) || !slices.Equal(res.Unchanged, want.Unchanged) || len(res.Running) != 0 ||
		!slices.Equal(res.CancelRequested, want.CancelRequested) || !slices.Equal(res.NotFound, want.NotFound) {
		t.Fatalf("result %+v, want %+v", res, want)
	}
	if n := countJobs(t, b.pool, "id = ANY($1) AND state = 'cancelled' AND finalized_at IS NOT NULL", []int64{scheduled, available}); n != 2 {
		t.Errorf("%d of 2 jobs cancelled", n)
	}
	if n := countJobs(t, b.pool, "id = ANY($1) AND state = 'running' AND cancel_requested_at IS NOT NULL", []int64{running}); n != 1 {
		t.Errorf("running job's cancel not requested")
	}
	if after := readClaim(t, b.pool, running); *after.fence != *before.fence || !after.leaseUntil.Equal(*before.leaseUntil) {
		t.Errorf("running job's claim changed: %+v, was %+v", after, before)
	}
}
