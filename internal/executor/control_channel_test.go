package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// TestCancelBeforeAdd sends JobCancel's control message for claims before
// the executor registers them, as for a job claimed ahead and waiting for
// an executor: the claim named is cancelled as it is added, and no other.
func TestCancelBeforeAdd(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cancel := func(id, fence int64) string {
		return fmt.Sprintf(`{"op":"cancel","id":%d,"fence":%d}`, id, fence)
	}
	add := func(a *ActiveJobs, id, fence int64) (*ActiveJob, context.Context) {
		ctx, stop := context.WithCancelCause(context.Background())
		t.Cleanup(func() { stop(nil) })
		j := a.Add(&pgqueuetype.JobRow{ID: id, Fence: fence}, stop, time.Now(), time.Minute)
		return j, ctx
	}

	a := NewActiveJobs()
	a.HandleControl(cancel(7, 3), log)
	a.HandleControl(cancel(8, 4), log)

	// The claim named: cancelled with ErrJobCancelled as it is added.
	j, ctx := add(a, 7, 3)
	if !j.CancelRequested() || !errors.Is(context.Cause(ctx), pgqueuetype.ErrJobCancelled) {
		t.Fatalf("claim 7/3 added after its cancel: requested %v, cause %v", j.CancelRequested(), context.Cause(ctx))
	}
	// Another claim of a job named: a later fence is not the one asked for.
	j, ctx = add(a, 8, 5)
	if j.CancelRequested() || ctx.Err() != nil {
		t.Fatal("claim 8/5 cancelled by a request for claim 8/4")
	}
	// A request is used once.
	a.remove(j)
	j, ctx = add(a, 7, 3)
	if j.CancelRequested() || ctx.Err() != nil {
		t.Fatal("a kept request cancelled a second registration")
	}
	// Registered first: cancelled at once, nothing kept.
	j, ctx = add(a, 9, 6)
	a.HandleControl(cancel(9, 6), log)
	if !errors.Is(context.Cause(ctx), pgqueuetype.ErrJobCancelled) || !j.CancelRequested() {
		t.Fatal("running claim 9/6 not cancelled")
	}
	if _, kept := a.early[claimKey{9, 6}]; kept {
		t.Fatal("a request for a running claim was kept")
	}
}

// TestCancelBeforeAddBounded keeps at most earlyCancelMax requests: past
// it, those older than earlyCancelTTL make room, and without such a
// request a new one is not kept.
func TestCancelBeforeAddBounded(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	now := time.Now()
	a := NewActiveJobs()
	a.now = func() time.Time { return now }
	for i := range earlyCancelMax {
		a.HandleControl(fmt.Sprintf(`{"op":"cancel","id":%d,"fence":1}`, i), log)
	}
	a.HandleControl(`{"op":"cancel","id":-1,"fence":1}`, log)
	if len(a.early) != earlyCancelMax {
		t.Fatalf("%d requests kept, want %d", len(a.early), earlyCancelMax)
	}
	if _, kept := a.early[claimKey{-1, 1}]; kept {
		t.Fatal("a request past the bound was kept with none expired")
	}
	now = now.Add(earlyCancelTTL + time.Second)
	a.HandleControl(`{"op":"cancel","id":-2,"fence":1}`, log)
	if _, kept := a.early[claimKey{-2, 1}]; !kept || len(a.early) != 1 {
		t.Fatalf("after the TTL: %d kept, the new one kept %v", len(a.early), kept)
	}
}
