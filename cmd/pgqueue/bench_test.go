package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/pgtest"
)

// benchChildEnv makes this test binary, started again as a child of a
// burn-down with --layouts, run the command line it is given: the children
// run `bench _child ...` as the pgqueue binary would.
const benchChildEnv = "PGQUEUE_BENCH_CMD_TEST_CHILD"

func init() {
	if os.Getenv(benchChildEnv) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
}

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
		{[]string{"burn-down", "--processes", "4", "--workers", "100"}, true},
		{[]string{"burn-down", "--layouts", "1x1000,4x100,8x50", "--rounds", "3"}, true},
		{[]string{"burn-down", "--raw", "--rounds", "3"}, true},
		{[]string{"sustained", "--retention", "1m", "--interval", "10s", "--duration", "10m"}, true},
		{[]string{"burn-down", "--unsafe-fsync-off"}, true},
		{[]string{"burn-down", "--layouts", "4x"}, false},
		{[]string{"burn-down", "--layouts", "0x10"}, false},
		{[]string{"burn-down", "--processes", "0"}, false},
		{[]string{"burn-down", "--processes", "2", "--raw"}, false},
		{[]string{"burn-down", "--processes", "2", "--layouts", "1x10"}, false},
		{[]string{"burn-down", "--processes", "2", "--cpuprofile", "x.prof"}, false},
		{[]string{"sustained", "--processes", "2"}, false},
		{[]string{"sustained", "--rounds", "2"}, false},
		{[]string{"sustained", "--interval", "0s"}, false},
		{[]string{"idle", "--retention", "1m"}, false},
		{[]string{"burn-down", "--raw", "--retention", "1m"}, false},
		{[]string{"limit", "--max-running", "40"}, true},
		{[]string{"limit", "--per-key", "1", "--keys", "10000", "--baseline", "--rounds", "2"}, true},
		{[]string{"limit", "--rate", "600/1m", "--duration", "3m"}, true},
		{[]string{"limit"}, false},
		{[]string{"limit", "--per-key", "1"}, false},
		{[]string{"limit", "--max-running", "0"}, false},
		{[]string{"limit", "--rate", "600"}, false},
		{[]string{"limit", "--max-running", "4", "--job-duration", "-1s"}, false},
		{[]string{"limit", "--max-running", "4", "--filler", "10"}, false},
		{[]string{"limit", "--max-running", "4", "--layouts", "1x10"}, false},
		{[]string{"sequence"}, true},
		{[]string{"sequence", "--sequences", "10", "--per-sequence", "5", "--processes", "2"}, true},
		{[]string{"sequence", "--sequences", "0"}, false},
		{[]string{"sequence", "--max-running", "4"}, false},
		{[]string{"sequence", "--rate", "600/1m"}, false},
		{[]string{"workflow"}, true},
		{[]string{"workflow", "--shape", "fan-in,chain", "--jobs", "100", "--rounds", "2"}, true},
		{[]string{"workflow", "--shape", "star"}, false},
		{[]string{"workflow", "--processes", "2"}, false},
		{[]string{"workflow", "--raw"}, false},
		{[]string{"burn-down", "--shape", "chain"}, false},
		{[]string{"burn-down", "--keys", "10"}, false},
		{[]string{"sustained", "--job-duration", "10ms"}, false},
		{[]string{"sustained", "--rate", "600/1m"}, false},
	} {
		_, err := parseBenchArgs(tc.args)
		if (err == nil) != tc.ok {
			t.Errorf("%q: err %v, want ok=%v", tc.args, err, tc.ok)
		}
	}
}

// TestBenchArgsServer checks the flags of the server the bench measures:
// pg_stat_statements with the modes that report it, settings only for a
// throwaway server.
func TestBenchArgsServer(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"burn-down", "--raw", "--pg-stat-statements"}, true},
		{[]string{"sustained", "--pg-stat-statements"}, true},
		{[]string{"workflow", "--pg-stat-statements"}, true},
		{[]string{"idle", "--pg-stat-statements"}, false},
		{[]string{"burn-down", "--processes", "2", "--pg-stat-statements"}, false},
		{[]string{"sustained", "--server-setting", "autovacuum_naptime=10s", "--server-setting", "shared_preload_libraries=a,b"}, true},
		{[]string{"sustained", "--server-setting", "naptime"}, false},
		{[]string{"sustained", "--server-setting", "=1"}, false},
		{[]string{"sustained", "--server-setting", "max_wal_size=1GB", "--database-url", "postgres://x"}, false},
	} {
		a, err := parseBenchArgs(tc.args)
		if (err == nil) != tc.ok {
			t.Errorf("%q: err %v, want ok=%v", tc.args, err, tc.ok)
		}
		if err == nil && len(a.serverSettings) > 0 && a.serverSettings["shared_preload_libraries"] != "a,b" {
			t.Errorf("%q: settings %v", tc.args, a.serverSettings)
		}
	}
}

// TestBenchBurnDownRaw runs a small burn-down with the raw ceiling through
// the command and checks its report.
func TestBenchBurnDownRaw(t *testing.T) {
	skipInShortMode(t, "a 2,000-job burn-down through pgqueue bench")
	db := pgtest.DB().NewDatabase(t)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"bench", "burn-down", "--raw", "--jobs", "2000", "--workers", "100", "--filler", "500", "--database-url", db}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"synchronous_commit=", "autovacuum=", "enqueue", "library", "raw", "library/raw: enqueue ", "server CPU per job", "CPU per job: client", "statements: raw_claim"} {
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
	skipInShortMode(t, "a 3,000-row prune through pgqueue bench")
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

// TestBenchLayouts compares two process layouts over two rounds through
// the command, its child processes this test binary started again.
func TestBenchLayouts(t *testing.T) {
	skipInShortMode(t, "two rounds of two process layouts through pgqueue bench")
	t.Setenv(benchChildEnv, "1")
	db := pgtest.DB().NewDatabase(t)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"bench", "burn-down", "--layouts", "1x40,2x20", "--rounds", "2", "--jobs", "1000", "--database-url", db}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"round 2", "\n1x40 ", "\n2x20 ", " 1000 jobs in ", "client µs/j", "claim batch"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
	// Two rounds of two layouts: 4 summary rows.
	if n := strings.Count(out.String(), "\n1      ") + strings.Count(out.String(), "\n2      "); n != 4 {
		t.Fatalf("%d summary rows, want 4:\n%s", n, out.String())
	}
}

// TestBenchLimit runs a limit run with its baseline, and a sequence run,
// through the command, their child processes this test binary started
// again, and checks their reports.
func TestBenchLimit(t *testing.T) {
	skipInShortMode(t, "a limit run with its baseline and a sequence run through pgqueue bench")
	t.Setenv(benchChildEnv, "1")
	db := pgtest.DB().NewDatabase(t)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"bench", "limit", "--max-running", "4", "--per-key", "1", "--keys", "8", "--rate", "1000/1s",
		"--baseline", "--processes", "2", "--workers", "5", "--jobs", "200", "--job-duration", "5ms", "--database-url", db}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"limit: max running 4, max running per key 1, rate 1000/1s; 200 jobs over 8 partition keys; 2 processes x 5 workers",
		"\nlimited          200 jobs in", "\nbaseline         200 jobs in", "peak running 4 (limit 4), per key 1 (limit 1)",
		"rate 1000/1s: at most ", "limited/baseline: ", "CPU per job: client", "/ideal"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
	// Anywhere in the statements, which are listed by count: under load
	// the completer's smaller batches can outnumber the claims.
	if !regexp.MustCompile(`statements: (.*\), )?claim_flow \d+`).MatchString(out.String()) {
		t.Fatalf("report lacks claim_flow statements:\n%s", out.String())
	}

	out.Reset()
	code = run(context.Background(), []string{"bench", "sequence", "--sequences", "3", "--per-sequence", "4", "--processes", "2", "--workers", "2",
		"--job-duration", "1ms", "--database-url", db}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"sequence: 3 sequences of 4 jobs", "\nsequences         12 jobs in", "3 sequences, 12 jobs completed: order kept"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestBenchWorkflow runs every workflow shape through the command and
// checks the report.
func TestBenchWorkflow(t *testing.T) {
	skipInShortMode(t, "workflow runs through pgqueue bench")
	db := pgtest.DB().NewDatabase(t)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"bench", "workflow", "--jobs", "300", "--workers", "20", "--database-url", db}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"workflow: 300 jobs, 20 workers; shapes fan-out, fan-in, layered, chain",
		"warm-up: independent, fan-out, fan-in, layered, chain, 300 jobs each, not counted",
		"\nindependent ", "\nfan-out  ", "\nfan-in  ", "\nlayered  ", "\nchain  ", "  300 jobs in",
		"release (last parent completed → child started), 299 jobs: p50 ", "/independent"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestBenchSustainedReport runs a short sustained run with pruning through
// the command and checks the report by interval and the table's state.
func TestBenchSustainedReport(t *testing.T) {
	skipInShortMode(t, "a 2 s sustained run through pgqueue bench")
	db := pgtest.DB().NewDatabase(t)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"bench", "sustained", "--rate", "200", "--duration", "2s", "--interval", "1s", "--workers", "20", "--retention", "1h", "--database-url", db}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"retention 1h0m0s", "claim p99", "\n0s ", "\n1s ", "table before: fetch index", "table after:  fetch index", "CPU per job: client", "rows deleted during the run"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestBenchServer checks the throwaway server's settings: production's
// durability and autovacuum by default, fsync off only when asked.
func TestBenchServer(t *testing.T) {
	skipInShortMode(t, "two throwaway servers of pgqueue bench (initdb each)")
	for _, tc := range []struct {
		unsafe bool
		want   string
	}{{false, "fsync=on full_page_writes=on autovacuum=on"}, {true, "fsync=off full_page_writes=off autovacuum=on"}} {
		ctx := context.Background()
		var log bytes.Buffer
		url, release, err := benchServer(ctx, "", tc.unsafe, nil, &log)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			_ = release()
			t.Fatal(err)
		}
		var got string
		err = conn.QueryRow(ctx, "SELECT 'fsync=' || current_setting('fsync') || ' full_page_writes=' || current_setting('full_page_writes') || ' autovacuum=' || current_setting('autovacuum')").Scan(&got)
		_ = conn.Close(ctx)
		if rerr := release(); rerr != nil {
			t.Fatal(rerr)
		}
		if err != nil || got != tc.want {
			t.Fatalf("unsafe %v: %q (%v), want %q", tc.unsafe, got, err, tc.want)
		}
	}
}
