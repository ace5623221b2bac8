package pgqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// A holder stalled inside its transaction, after CheckFenceTx and before
// its commit, keeps the fence row locked. The next holder's CheckFenceTx
// does not wait for it forever: past Config.FenceLockTimeout (5 s by
// default) it returns ErrFenceBusy, and once the stalled transaction ends
// the next check passes. The bound applies to the check alone: the
// transaction's own lock_timeout is as it was after a check that passed.
func TestCheckFenceTxStalledHolder(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		bound time.Duration // Config.FenceLockTimeout; 0: the default
		wait  time.Duration // the bound in force
	}{
		{"Default", 0, 5 * time.Second},
		{"Configured", 300 * time.Millisecond, 300 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.bound == 0 {
				skipInShortMode(t, "CheckFenceTx's default 5 s bound on a stalled holder (the configured bound runs)")
			}
			pool := newPool(t)
			c := newClient(t, pool, &pgqueue.Config{FenceLockTimeout: tt.bound})
			// Past the bound by far: the old code waits until this ends,
			// and the test fails then rather than hanging.
			ctx, cancel := context.WithTimeout(t.Context(), tt.wait+20*time.Second)
			defer cancel()

			stalled := beginRolledBack(t, pool)
			must(t, c.CheckFenceTx(ctx, stalled, "invoice:7", 1))

			next := beginRolledBack(t, pool)
			if err := c.CheckFenceTx(ctx, next, "invoice:7", 2); !errors.Is(err, pgqueue.ErrFenceBusy) {
				t.Fatalf("CheckFenceTx while the stalled holder keeps its transaction open: %v, want ErrFenceBusy", err)
			}
			must(t, ctx.Err())

			// The stalled holder's transaction ends (its session was
			// killed, or idle_in_transaction_session_timeout ended it).
			must(t, stalled.Rollback(ctx))
			after := beginRolledBack(t, pool)
			if _, err := after.Exec(ctx, "SET LOCAL lock_timeout = '7s'"); err != nil {
				t.Fatal(err)
			}
			must(t, c.CheckFenceTx(ctx, after, "invoice:7", 2))
			var lockTimeout string
			must(t, after.QueryRow(ctx, "SHOW lock_timeout").Scan(&lockTimeout))
			if lockTimeout != "7s" {
				t.Errorf("lock_timeout after CheckFenceTx: %q, want the transaction's own 7s", lockTimeout)
			}
			must(t, after.Commit(ctx))
		})
	}
}

// beginRolledBack begins a transaction that is rolled back when the test
// ends, whatever happened: a test that failed while a transaction held
// the fence row must not leave the others waiting for it.
func beginRolledBack(t *testing.T, pool *pgxpool.Pool) pgx.Tx {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	must(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}
