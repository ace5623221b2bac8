package pgqueue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgqueue/pgqueue"
)

// TestCheckFenceTx records tokens for one resource: lower ones are
// refused, in Go and in SQL alike; equal ones pass.
func TestCheckFenceTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	c := newClient(t, pool, nil)
	check := func(token int64) error {
		tx, err := pool.Begin(ctx)
		must(t, err)
		defer tx.Rollback(ctx)
		if err := c.CheckFenceTx(ctx, tx, "invoice:42", token); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	for _, step := range []struct {
		token int64
		stale bool
	}{{5, false}, {7, false}, {7, false}, {6, true}, {1, true}, {9, false}} {
		err := check(step.token)
		if step.stale != errors.Is(err, pgqueue.ErrStaleFence) || (!step.stale && err != nil) {
			t.Fatalf("token %d: err %v, stale want %v", step.token, err, step.stale)
		}
	}
	// The SQL function refuses the same way inside the caller's statements.
	_, err := pool.Exec(ctx, "SELECT pgqueue.check_fence('invoice:42', 8)")
	if !pgqueue.IsStaleFence(err) {
		t.Fatalf("SQL check_fence: %v, want PQF01", err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "PQF01" {
		t.Fatalf("SQLSTATE of %v", err)
	}
	// A token refused in a transaction never records its write.
	tx, err := pool.Begin(ctx)
	must(t, err)
	defer tx.Rollback(ctx)
	must(t, c.CheckFenceTx(ctx, tx, "other", 3))
}
