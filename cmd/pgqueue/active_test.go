package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/internal/schemaversion"
)

// migrate down is refused while a client works the schema, names it, and
// goes ahead once it stopped or with --ignore-active.
func TestMigrateDownRefusedWhileActive(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "migrate down refused while clients are active")
	ctx := context.Background()
	url := pgtest.DB().NewDatabase(t)
	migrateCmd := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"migrate", "--database-url", url}, args...), &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	if code, out := migrateCmd("up"); code != exitOK {
		t.Fatalf("up: %d %s", code, out)
	}
	pool, err := pgxpool.New(ctx, url)
	must(t, err)
	defer pool.Close()
	client, err := pgqueue.New(pool, &pgqueue.Config{ID: "client-under-test"})
	must(t, err)
	must(t, client.Start(ctx))
	stopped := false
	defer func() {
		if !stopped {
			_ = client.Stop(ctx)
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		must(t, pool.QueryRow(ctx, `SELECT count(*) FROM pgqueue.leases WHERE expires_at > now()`).Scan(&n))
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client never took the leader lease")
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, out := migrateCmd("down", "1")
	if code != exitError || !strings.Contains(out, "refused") || !strings.Contains(out, "client-under-test (leader)") {
		t.Fatalf("down while a client runs: exit %d: %s", code, out)
	}
	if code, out := migrateCmd("version"); code != exitOK || strings.TrimSpace(out) != fmt.Sprint(schemaversion.Latest()) {
		t.Fatalf("version after the refusal: %d %s", code, out)
	}
	must(t, client.Stop(ctx))
	stopped = true
	if code, out := migrateCmd("down", "1"); code != exitOK || !strings.Contains(out, "reverted") {
		t.Fatalf("down after Stop: %d %s", code, out)
	}
	if code, out := migrateCmd("down", "1", "--ignore-active"); code != exitOK {
		t.Fatalf("down --ignore-active: %d %s", code, out)
	}
	if code, out := migrateCmd("up", "--ignore-active"); code != exitUsage {
		t.Fatalf("up --ignore-active: %d %s", code, out)
	}
}

// A process counts once, however many roles it plays: its client leads
// maintenance and runs jobs under one ID. The old refusal said "2
// client(s)" for it (its leader row and its workers' row).
func TestMigrateDownCountsProcesses(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "migrate down counting the processes still using the schema")
	b := setupOps(t) // one started client, ID ops-worker, running two jobs
	ctx := t.Context()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var n int
		must(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM pgqueue.leases WHERE holder = $1 AND expires_at > now()`, opsWorkerID).Scan(&n))
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ops-worker never took the leader lease")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"migrate", "--database-url", b.url, "down", "1"}, &stdout, &stderr)
	out := stdout.String() + stderr.String()
	if code != exitError || !strings.Contains(out, "refused: 1 process works schema pgqueue now (ops-worker (leader, 2 running jobs))") {
		t.Fatalf("down under one process: exit %d: %s", code, out)
	}
}
