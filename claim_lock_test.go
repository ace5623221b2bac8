package pgqueue_test

import (
	"context"
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testlog"
)

// A claim on a queue with a backlog takes the queue's claim lock first
// (sql/claim_lock.sql): while
// another session holds the lock, the client's claim waits for it, seen
// in pg_locks; after a bounded wait it claims without the lock, so a
// holder that stalls never stops the queue, and the client says so.
func TestClaimLockHeldElsewhere(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "the claim's bounded wait for a queue claim lock another session holds")
	ctx := context.Background()
	pool := newPool(t)
	holder, err := pool.Begin(ctx)
	must(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended('pgqueue:claim:' || $1 || ':' || $2, 0))",
		pgqueue.SchemaDefault, pgqueue.QueueDefault)
	must(t, err)

	var logs testlog.Buffer
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(context.Context, *pgqueue.Job[noteArgs]) error { return nil }, nil))
	b := startClient(t, pool, ws, &pgqueue.Config{Logger: logs.Logger()})
	// A backlog: the first claim fills its room, so the next ones take
	// the claim lock.
	params := noteParams(50)
	_, err = b.client.EnqueueMany(ctx, params)
	must(t, err)

	waitFor(t, "a claim waiting for the claim lock", func() bool {
		var waiting int
		must(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").Scan(&waiting))
		return waiting > 0
	})
	waitFor(t, "every job completed", func() bool { return countJobs(t, pool, "state = 'completed'") == len(params) })
	// Completed while the lock was still held: claimed without it.
	var one int
	must(t, holder.QueryRow(ctx, "SELECT 1").Scan(&one))
	if !strings.Contains(logs.String(), "claimed without it") {
		t.Fatalf("no warning about the claim lock; logged:\n%s", logs.String())
	}
}
