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

// Start refuses a schema older than the client needs, instead of running
// queries that fail on missing columns in a loop.
func TestStartRefusesOutdatedSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	mg, err := pgqueue.NewMigrator(ctx, pool, pgqueue.SchemaDefault)
	must(t, err)
	defer mg.Close()
	if _, err := mg.Down(ctx, 1); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, pool, nil)
	if err := c.Start(ctx); !errors.Is(err, pgqueue.ErrSchemaOutdated) {
		t.Fatalf("Start on a schema one version behind: %v", err)
	}
	if _, err := mg.Up(ctx); err != nil {
		t.Fatal(err)
	}
	must(t, c.Start(ctx))
	must(t, c.Stop(ctx))

	// A schema never migrated is outdated too.
	other := newClient(t, pool, &pgqueue.Config{Schema: "never_migrated"})
	if err := other.Start(ctx); !errors.Is(err, pgqueue.ErrSchemaOutdated) {
		t.Fatalf("Start on a schema never migrated: %v", err)
	}
}

// A running client whose schema is migrated down says so once and stops
// claiming, instead of logging every failed claim; migrated up again, it
// works again.
func TestRunningClientMeetsOutdatedSchema(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "a running client meeting its schema migrated down and up again")
	ctx := context.Background()
	pool := newPool(t)
	var logs testlog.Buffer
	done := make(chan int, 10)
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
		done <- job.Args.N
		return nil
	}, nil))
	b := startClient(t, pool, ws, &pgqueue.Config{FetchPollInterval: 20 * time.Millisecond, Logger: logs.Logger()})
	mg, err := pgqueue.NewMigrator(ctx, pool, pgqueue.SchemaDefault)
	must(t, err)
	defer mg.Close()
	// Migration 7 made the queues table that every claim reads: go back
	// to version 6, however many migrations came after.
	v, _, err := mg.Version(ctx)
	must(t, err)
	if v <= 6 {
		t.Fatalf("schema at version %d, want above 6", v)
	}
	if _, err := mg.Down(ctx, int(v)-6); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the outdated schema said", func() bool { return strings.Contains(logs.String(), "schema is older than this client needs") })
	// An observation window, not a wait: the old code logged a failed poll
	// every 20 ms in it; now there must be no more lines.
	time.Sleep(300 * time.Millisecond)
	out := logs.String()
	if n := strings.Count(out, "schema is older than this client needs"); n != 1 {
		t.Fatalf("said %d times:\n%s", n, out)
	}
	// While the migration ran, a poll may have failed on its locks (a
	// deadlock with the DDL was seen): a real failure, logged. Once the
	// outdated schema was said, nothing more may fail.
	_, after, _ := strings.Cut(out, "schema is older than this client needs")
	if strings.Contains(after, "claim failed") || strings.Contains(after, "poll failed") {
		t.Fatalf("failed claims logged after the outdated schema was said:\n%s", out)
	}
	if _, err := mg.Up(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = b.client.Enqueue(ctx, noteArgs{N: 7}, nil)
	must(t, err)
	select {
	case n := <-done:
		if n != 7 {
			t.Fatalf("ran %d", n)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("no job worked after migrating up:\n%s", logs.String())
	}
}
