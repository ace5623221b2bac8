package dberr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/puddle/v2"
)

func TestWrap(t *testing.T) {
	if err := Wrap("pkg", "op", nil); err != nil {
		t.Errorf("Wrap(nil) = %v", err)
	}
	closed := Wrap("pkg", "claim", fmt.Errorf("acquire: %w", puddle.ErrClosedPool))
	if !errors.Is(closed, ErrClosedPool) || closed.Error() != "pkg: claim: "+ErrClosedPool.Error() {
		t.Errorf("closed pool: got %v", closed)
	}
	other := errors.New("boom")
	if err := Wrap("pkg", "op", other); !errors.Is(err, other) || err.Error() != "pkg: op: boom" {
		t.Errorf("other: got %v", err)
	}
}

func TestCtx(t *testing.T) {
	if err := Ctx(context.Background(), "pkg", "op"); err != nil {
		t.Errorf("live context: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Ctx(ctx, "pkg", "op"); !errors.Is(err, context.Canceled) || err.Error() != "pkg: op: context canceled" {
		t.Errorf("cancelled context: %v", err)
	}
	// Cancelled with a cause: both, so that a handler's write after its
	// claim was lost matches ErrJobLeaseLost.
	lost := errors.New("lease lost")
	ctx, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(lost)
	if err := Ctx(ctx, "pkg", "op"); !errors.Is(err, context.Canceled) || !errors.Is(err, lost) {
		t.Errorf("cancelled with a cause: %v", err)
	}
}
