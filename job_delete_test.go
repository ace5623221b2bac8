package pgqueue_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/pgqueue/pgqueue"
)

func TestJobDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("DeletesAnyJobNotRunning", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		for _, state := range []pgqueue.JobState{pgqueue.StateScheduled, pgqueue.StateAvailable,
			pgqueue.StateCompleted, pgqueue.StateDiscarded, pgqueue.StateCancelled} {
			id := b.jobIn(t, state, nil)
			job, err := b.client.JobDelete(ctx, id)
			must(t, err)
			if job.ID != id || job.State != state {
				t.Errorf("deleted job %d in %s, want %d in %s", job.ID, job.State, id, state)
			}
			if n := countJobs(t, b.pool, "id = $1", id); n != 0 {
				t.Errorf("%s job still there", state)
			}
		}
	})

	t.Run("ErrorIfRunning", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		id := b.jobIn(t, pgqueue.StateAvailable, nil)
		_, err := pgqueue.Claim(ctx, b.client, pgqueue.QueueDefault, 1)
		must(t, err)
		before := readClaim(t, b.pool, id)
		if _, err := b.client.JobDelete(ctx, id); !errors.Is(err, pgqueue.ErrJobRunning) {
			t.Fatalf("err = %v, want ErrJobRunning", err)
		}
		if after := readClaim(t, b.pool, id); after.state != "running" || *after.fence != *before.fence || !after.leaseUntil.Equal(*before.leaseUntil) {
			t.Fatalf("claim changed: %+v, was %+v", after, before)
		}
	})

	t.Run("ErrorIfNotFound", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		if _, err := b.client.JobDelete(ctx, 4711); !errors.Is(err, pgqueue.ErrJobNotFound) {
			t.Fatalf("err = %v, want ErrJobNotFound", err)
		}
	})

	t.Run("TxDeletesAtCommitOnly", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		id := b.jobIn(t, pgqueue.StateCompleted, nil)
		tx, err := b.pool.Begin(ctx)
		must(t, err)
		_, err = b.client.JobDeleteTx(ctx, tx, id)
		must(t, err)
		must(t, tx.Rollback(ctx))
		if n := countJobs(t, b.pool, "id = $1", id); n != 1 {
			t.Fatal("a rolled back delete deleted the job")
		}
		res, err := b.client.JobDeleteManyTx(ctx, b.mustBegin(t), []int64{id})
		must(t, err)
		if !slices.Equal(res.Changed, []int64{id}) {
			t.Fatalf("result %+v", res)
		}
	})

	// A claim in flight holds the available job's row when the deletes
	// reach it: they wait, and find it running once the claim commits.
	t.Run("RaceWithClaimLeavesTheClaimAlone", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		id := b.jobIn(t, pgqueue.StateAvailable, nil)
		tx, err := b.pool.Begin(ctx)
		must(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		claimed, err := pgqueue.ClaimTx(ctx, b.client, tx, pgqueue.QueueDefault, 1)
		must(t, err)
		if len(claimed) != 1 {
			t.Fatalf("claimed %d jobs", len(claimed))
		}
		b.raceWithClaim(t, tx, claimed[0], id,
			func() error { _, err := b.client.JobDelete(ctx, id); return err },
			func() (*pgqueue.JobManyResult, error) { return b.client.JobDeleteMany(ctx, []int64{id}) })
	})

	// The same race, the claim rolled back: the job was never running,
	// and the delete goes ahead.
	t.Run("RaceWithClaimRolledBackDeletes", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		id := b.jobIn(t, pgqueue.StateAvailable, nil)
		tx := b.mustBegin(t)
		_, err := pgqueue.ClaimTx(ctx, b.client, tx, pgqueue.QueueDefault, 1)
		must(t, err)
		done := make(chan error, 1)
		go func() {
			_, err := b.client.JobDelete(ctx, id)
			done <- err
		}()
		waitLockWaiter(t, b.pool)
		must(t, tx.Rollback(ctx))
		must(t, <-done)
		if n := countJobs(t, b.pool, "id = $1", id); n != 0 {
			t.Fatal("job still there")
		}
	})

	t.Run("ManySaysWhatHappenedToEachID", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		discarded := b.jobIn(t, pgqueue.StateDiscarded, nil)
		running := b.jobIn(t, pgqueue.StateAvailable, nil)
		_, err := pgqueue.Claim(ctx, b.client, pgqueue.QueueDefault, 1)
		must(t, err)
		scheduled := b.jobIn(t, pgqueue.StateScheduled, nil)
		before := readClaim(t, b.pool, running)

		res, err := b.client.JobDeleteMany(ctx, []int64{scheduled, 4711, running, discarded, scheduled})
		must(t, err)
		if !slices.Equal(res.Changed, []int64{discarded, scheduled}) || len(res.Unchanged) != 0 ||
			!slices.Equal(res.Running, []int64{running}) || !slices.Equal(res.NotFound, []int64{4711}) {
			t.Fatalf("result %+v", res)
		}
		if n := countJobs(t, b.pool, "true"); n != 1 {
			t.Errorf("%d jobs left, want the running one", n)
		}
		if after := readClaim(t, b.pool, running); *after.fence != *before.fence || !after.leaseUntil.Equal(*before.leaseUntil) {
			t.Errorf("running job's claim changed: %+v, was %+v", after, before)
		}
	})
}
