package pglock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/pglock"
)

// A holder stalled between CheckFenceTx and its commit keeps the fence
// row locked; the next holder's CheckFenceTx returns ErrFenceBusy once the
// bound has passed (the Locker's Config.FenceLockTimeout, or
// DefaultFenceLockTimeout for the free function) instead of waiting as
// long as the stalled transaction stays open.
func TestCheckFenceTxFenceBusy(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	locker := newLocker(t, pool, &pglock.Config{FenceLockTimeout: 200 * time.Millisecond})
	for _, tt := range []struct {
		name  string
		bound time.Duration
		check func(ctx context.Context, tx pgx.Tx, resource string, token int64) error
	}{
		{"Locker", 200 * time.Millisecond, locker.CheckFenceTx},
		{"Free", pglock.DefaultFenceLockTimeout, func(ctx context.Context, tx pgx.Tx, resource string, token int64) error {
			return pglock.CheckFenceTx(ctx, tx, "", resource, token)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.bound == pglock.DefaultFenceLockTimeout {
				skipInShortMode(t, "CheckFenceTx's default bound on a busy fence (the locker's configured bound runs)")
			}
			// Far past the bound: without one the check waits until this
			// ends, and the test fails then instead of hanging.
			ctx, cancel := context.WithTimeout(t.Context(), tt.bound+20*time.Second)
			defer cancel()
			resource := "report:" + tt.name
			stalled := begin(t, pool)
			must(t, tt.check(ctx, stalled, resource, 1))
			next := begin(t, pool)
			if err := tt.check(ctx, next, resource, 2); !errors.Is(err, pglock.ErrFenceBusy) {
				t.Fatalf("CheckFenceTx while the stalled holder keeps its transaction open: %v, want ErrFenceBusy", err)
			}
			must(t, ctx.Err())
		})
	}
}
