package pgqueue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testlog"
)

// A schema dropped under a running client (migrate down --all
// --ignore-active) is said once: the claims, the poller and every
// maintenance task hold back and stay quiet, SchemaErr says why, and
// migrated up again the client says so and works. Before, the
// maintenance tasks logged an ERROR at every round.
func TestMaintenanceMeetsDroppedSchema(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "a running client meeting its schema dropped and migrated up again")
	ctx := context.Background()
	pool := newPool(t)
	var logs testlog.Buffer
	done := make(chan int, 10)
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
		done <- job.Args.N
		return nil
	}, nil))
	// Every round every 50 ms: the old code logged each one.
	b := startClient(t, pool, ws, &pgqueue.Config{Logger: logs.Logger(), FetchPollInterval: 50 * time.Millisecond,
		SchedulerInterval: 50 * time.Millisecond, RescueInterval: 50 * time.Millisecond, PruneInterval: 50 * time.Millisecond,
		CompletedJobRetention: time.Hour})
	waitFor(t, "the client to lead maintenance", func() bool { return strings.Contains(logs.String(), "leading maintenance") })
	if err := b.client.SchemaErr(); err != nil {
		t.Fatalf("SchemaErr on a current schema: %v", err)
	}

	mg, err := pgqueue.NewMigrator(ctx, pool, pgqueue.SchemaDefault)
	must(t, err)
	defer mg.Close()
	if _, err := mg.Down(ctx, 0); err != nil { // every migration
		t.Fatal(err)
	}
	waitFor(t, "the dropped schema said", func() bool { return strings.Contains(logs.String(), "schema is older than this client needs") })
	if err := b.client.SchemaErr(); !errors.Is(err, pgqueue.ErrSchemaOutdated) {
		t.Fatalf("SchemaErr after the drop: %v", err)
	}
	// An observation window, not a wait: the old code logged dozens of
	// ERRORs in it (the scheduler, rescuer and pruner each every 50 ms).
	start := len(logs.String())
	time.Sleep(3 * time.Second)
	window := logs.String()[start:]
	if n := strings.Count(window, "level=ERROR"); n > 2 { // at most the election's one line and the watch's
		t.Fatalf("%d ERROR lines in 3 s after the schema was dropped:\n%s", n, window)
	}
	if n := strings.Count(logs.String(), "schema is older than this client needs"); n != 1 {
		t.Fatalf("the dropped schema said %d times:\n%s", n, logs.String())
	}

	if _, err := mg.Up(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "SchemaErr to clear", func() bool { return b.client.SchemaErr() == nil })
	if !strings.Contains(logs.String(), "schema is current again") {
		t.Fatalf("no recovery line:\n%s", logs.String())
	}
	_, err = b.client.Enqueue(ctx, noteArgs{N: 3}, nil)
	must(t, err)
	select {
	case n := <-done:
		if n != 3 {
			t.Fatalf("ran %d", n)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("no job worked after migrating up:\n%s", logs.String())
	}
}
