package pgqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

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

type fencedArgs struct {
	Key string `json:"key"`
}

func (fencedArgs) Kind() string { return "fenced" }

// TestJobCheckFenceTx fences a handler's own writes in one call: the
// claim's fence on the job's resource for an ordinary job, the lock's
// fence on the key's resource for a singleton job; once a newer holder
// recorded a higher token there, the handler's check is refused.
func TestJobCheckFenceTx(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		key  string
		mode pgqueue.SingletonMode
	}{{"Ordinary", "", pgqueue.SingletonXact}, {"SingletonXact", "report", pgqueue.SingletonXact}, {"SingletonSession", "report", pgqueue.SingletonSession}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := newPool(t)
			type seen struct {
				resource     string
				token        int64
				first, stale error
			}
			got := make(chan seen, 1)
			workers := pgqueue.NewWorkers()
			must(t, pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[fencedArgs]) error {
				s := seen{resource: pgqueue.JobResource(job.ID), token: job.Fence}
				if job.SingletonKey != "" {
					s.resource, s.token = pgqueue.SingletonResource(job.SingletonKey), job.LockFence
				}
				c := pgqueue.ClientFromContext(ctx)
				check := func() error { // in a transaction of its own, committed when it passes
					tx, err := pool.Begin(ctx)
					if err != nil {
						return err
					}
					defer tx.Rollback(ctx)
					if err := job.CheckFenceTx(ctx, tx); err != nil {
						return err
					}
					return tx.Commit(ctx)
				}
				s.first = check()
				// A newer holder of the same resource records its token.
				tx, err := pool.Begin(ctx)
				if err == nil {
					err = c.CheckFenceTx(ctx, tx, s.resource, s.token+1)
					if err == nil {
						err = tx.Commit(ctx)
					}
				}
				if err != nil {
					return err
				}
				s.stale = check()
				got <- s
				return nil
			}, &pgqueue.WorkerOpts{SingletonMode: tc.mode}))
			b := startClient(t, pool, workers, nil)
			if _, err := b.client.Enqueue(t.Context(), fencedArgs{Key: tc.key}, &pgqueue.EnqueueOpts{SingletonKey: tc.key}); err != nil {
				t.Fatal(err)
			}
			var s seen
			select {
			case s = <-got:
			case <-time.After(30 * time.Second):
				t.Fatal("the handler did not run")
			}
			if s.token == 0 {
				t.Fatalf("no token for %s", s.resource)
			}
			if s.first != nil {
				t.Fatalf("first check: %v", s.first)
			}
			if !errors.Is(s.stale, pgqueue.ErrStaleFence) {
				t.Fatalf("check after a newer holder: %v, want ErrStaleFence", s.stale)
			}
			var recorded int64
			must(t, pool.QueryRow(t.Context(), "SELECT token FROM pgqueue.fences WHERE resource = $1", s.resource).Scan(&recorded))
			if recorded != s.token+1 {
				t.Fatalf("recorded token for %s: %d, want the newer holder's %d", s.resource, recorded, s.token+1)
			}
		})
	}

	t.Run("ErrorOutsideAJob", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		tx, err := pool.Begin(t.Context())
		must(t, err)
		defer tx.Rollback(t.Context())
		job := &pgqueue.Job[fencedArgs]{JobRow: &pgqueue.JobRow{ID: 1, Fence: 1}}
		if err := job.CheckFenceTx(t.Context(), tx); !errors.Is(err, pgqueue.ErrNoJobContext) {
			t.Fatalf("outside a job's context: %v, want ErrNoJobContext", err)
		}
	})
}
