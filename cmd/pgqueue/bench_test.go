package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/pgtest"
)

func TestBenchArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"burn-down"}, true},
		{[]string{"--raw", "--jobs", "10", "burn-down"}, true},
		{[]string{"sustained", "--rate", "100", "--duration", "1s"}, true},
		{[]string{"idle"}, true},
		{[]string{"prune", "--rows", "1000"}, true},
		{[]string{"sustained", "--prune-backlog", "1000", "--prune"}, true},
		{[]string{"burn-down", "--prune"}, true},
		{[]string{"prune", "--rows", "0"}, false},
		{[]string{"idle", "--prune"}, false},
		{[]string{"prune", "--prune-backlog", "10"}, false},
		{[]string{"burn-down", "--raw", "--prune"}, false},
		{[]string{"sustained", "--prune-backlog", "-1"}, false},
		{[]string{}, false},
		{[]string{"fast"}, false},
		{[]string{"burn-down", "--jobs", "0"}, false},
		{[]string{"sustained", "--duration", "0s"}, false},
		{[]string{"burn-down", "--schema", "Bad-Schema"}, false},
	} {
		_, err := parseBenchArgs(tc.args)
		if (err == nil) != tc.ok {
			t.Errorf("%q: err %v, want ok=%v", tc.args, err, tc.ok)
		}
	}
}

// TestBenchBurnDownRaw runs a small burn-down with the raw ceiling through
// the command and checks its report.
func TestBenchBurnDownRaw(t *testing.T) {
	db := pgtest.DB().NewDatabase(t)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"bench", "burn-down", "--raw", "--jobs", "2000", "--workers", "100", "--filler", "500", "--database-url", db}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"synchronous_commit=", "enqueue", "library", "raw", "library/raw: enqueue "} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var done int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pgqueue_bench.jobs WHERE kind = 'bench_noop' AND state = 'completed'").Scan(&done); err != nil {
		t.Fatal(err)
	}
	if done != 2000 {
		t.Fatalf("%d jobs completed by the raw run, want 2000", done)
	}
}

// TestBenchPrune runs the prune mode through the command and checks its
// report and that the backlog is gone.
func TestBenchPrune(t *testing.T) {
	db := pgtest.DB().NewDatabase(t)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"bench", "prune", "--rows", "3000", "--database-url", db}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"synchronous_commit=", "prune backlog: 3000", "prune           3000 rows", "vacuum after it"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
}
