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
	// A token refused in a transaction never records its write: the
	// write made before the check goes with the transaction, and the
	// recorded token stays the highest.
	_, err = pool.Exec(ctx, "CREATE TABLE invoices (id int, fence bigint)")
	must(t, err)
	tx, err := pool.Begin(ctx)
	must(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, "INSERT INTO invoices VALUES (42, 8)")
	must(t, err)
	if err := c.CheckFenceTx(ctx, tx, "invoice:42", 8); !errors.Is(err, pgqueue.ErrStaleFence) {
		t.Fatalf("stale token in a transaction: %v", err)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("a transaction whose fence check failed committed")
	}
	var writes int
	var token int64
	must(t, pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM invoices), (SELECT token FROM pgqueue.fences WHERE resource = 'invoice:42')").Scan(&writes, &token))
	if writes != 0 || token != 9 {
		t.Fatalf("after a refused token: %d writes, recorded token %d (want 0 and 9)", writes, token)
	}
	// Another resource has tokens of its own.
	tx2, err := pool.Begin(ctx)
	must(t, err)
	defer tx2.Rollback(ctx)
	must(t, c.CheckFenceTx(ctx, tx2, "other", 3))
}
