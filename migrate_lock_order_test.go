package pgqueue_test

import (
	"context"
	"testing"

	"github.com/pgqueue/pgqueue"
)

// A migration down under running clients takes the jobs table first, as
// every client statement does before it reads queues: a statement that
// holds jobs and then wants queues waits for the migration instead of
// deadlocking with it, which failed `migrate down` (seen with a client
// polling while migration 7 went down).
func TestMigrateDownLocksJobsFirst(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "a migration down under running clients locking jobs before queues")
	// Down to migration 7, whose down drops queues and alters jobs; and to
	// 18, whose down drops job_gates and an index of jobs (a claim reads
	// jobs, then job_gates).
	for _, tc := range []struct {
		version int
		next    string
	}{{7, "queues"}, {18, "job_gates"}} {
		t.Run(tc.next, func(t *testing.T) {
			t.Parallel()
			migrateDownUnderClient(t, tc.version, tc.next)
		})
	}
}

// migrateDownUnderClient migrates down to version, then migrates it down
// while a client's transaction has read jobs, and has the client read
// table next: the migration must wait for the client without holding
// table.
func migrateDownUnderClient(t *testing.T, version int, table string) {
	ctx := context.Background()
	pool := newPool(t)
	mg, err := pgqueue.NewMigrator(ctx, pool, pgqueue.SchemaDefault)
	must(t, err)
	defer mg.Close()
	v, _, err := mg.Version(ctx)
	must(t, err)
	if v > uint(version) {
		_, err := mg.Down(ctx, int(v)-version)
		must(t, err)
	}

	// A client's statement, halfway: jobs read, queues next.
	client, err := pool.Begin(ctx)
	must(t, err)
	defer client.Rollback(ctx)
	_, err = client.Exec(ctx, "SELECT 1 FROM pgqueue.jobs LIMIT 0")
	must(t, err)

	down := make(chan error, 1)
	go func() {
		_, err := mg.Down(ctx, 1)
		down <- err
	}()
	// The migration waits behind the client's lock on jobs...
	waitFor(t, "the migration to wait for a lock", func() bool {
		var waiting bool
		must(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting))
		return waiting
	})
	// ...holding nothing the client needs next.
	_, err = client.Exec(ctx, "SELECT 1 FROM pgqueue."+table+" LIMIT 0")
	must(t, err)
	must(t, client.Commit(ctx))
	if err := <-down; err != nil {
		t.Fatalf("migrate down under a client's statement: %v", err)
	}
}
