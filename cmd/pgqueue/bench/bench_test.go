package bench_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/cmd/pgqueue/bench"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

// childEnv marks this test binary, started again by
// TestBurnDownProcesses, as a child process of BurnDownProcesses.
const childEnv = "PGQUEUE_BENCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := bench.RunChild(context.Background(), os.Args[1:], os.Getenv("DATABASE_URL"), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(pgtest.Main(m, func(context.Context, string) error { return nil }))
}

// TestRuns runs each benchmark mode small and checks it worked every job.
func TestRuns(t *testing.T) {
	skipInShortMode(t, "every benchmark mode, 3,000 jobs each")
	ctx := context.Background()
	pool := pgtest.DB().NewPool(t)
	var progress strings.Builder
	cfg := &bench.Config{Pool: pool, Jobs: 3000, Workers: 50, RawConns: 2, Filler: 1000, Rate: 500, Duration: time.Second, Progress: &progress,
		// Lines often, so that even a fast machine's runs print some.
		ProgressEvery: 20 * time.Millisecond}

	if err := bench.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	enq, err := bench.Enqueue(ctx, cfg)
	if err != nil || enq.Jobs != 3000 {
		t.Fatalf("enqueue: %v, %+v", err, enq)
	}
	lib, err := bench.BurnDown(ctx, cfg)
	if err != nil || lib.Jobs != 3000 {
		t.Fatalf("library burn-down: %v, %+v", err, lib)
	}
	checkUsage(t, "library", lib)
	for _, name := range []string{"claim", "complete_many"} {
		if !hasStatement(lib.Usage, name) {
			t.Errorf("library: no %s among the statements: %s", name, lib.Usage.StatementsLine())
		}
	}
	completed := func() int {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pgqueue_bench.jobs WHERE kind = 'bench_noop' AND state = 'completed'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := completed(); n != 3000 {
		t.Fatalf("%d completed after the library run", n)
	}

	if err := bench.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := bench.Enqueue(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	raw, err := bench.RawBurnDown(ctx, cfg)
	if err != nil || raw.Jobs != 3000 || completed() != 3000 {
		t.Fatalf("raw burn-down: %v, %+v", err, raw)
	}
	checkUsage(t, "raw", raw)
	// Each loop claims until a claim finds nothing: those are counted
	// as statements, not as claims.
	if got, want := raw.Usage.Statements, raw.Usage.Claims+raw.Usage.Writes+int64(cfg.RawConns); got != want {
		t.Errorf("raw: %d statements, want %d claims + %d completions + %d empty claims", got, raw.Usage.Claims, raw.Usage.Writes, cfg.RawConns)
	}

	if err := bench.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	sus, err := bench.Sustained(ctx, cfg)
	if err != nil || sus.Jobs == 0 || sus.Jobs != sus.Offered || sus.P50 <= 0 || sus.P99 < sus.P50 {
		t.Fatalf("sustained: %v, %+v", err, sus)
	}
	if int(sus.Jobs) != completed() {
		t.Fatalf("sustained worked %d, %d completed", sus.Jobs, completed())
	}
	var started, claims int
	for _, iv := range sus.Intervals {
		started += iv.Jobs
		claims += iv.Claims
		if iv.Jobs > 0 && (iv.P50 <= 0 || iv.P99 < iv.P50 || iv.Max < iv.P99) {
			t.Errorf("interval %+v: latencies out of order", iv)
		}
	}
	if started != int(sus.Jobs) || claims == 0 {
		t.Fatalf("intervals hold %d jobs and %d claims, want %d jobs and some claims: %+v", started, claims, sus.Jobs, sus.Intervals)
	}
	if sus.Before.FetchIndex == 0 || sus.After.Heap == 0 {
		t.Fatalf("table before %+v, after %+v", sus.Before, sus.After)
	}
	if !strings.Contains(bench.SustainedReport(sus), "claim p99") {
		t.Fatalf("report:\n%s", bench.SustainedReport(sus))
	}
	if !strings.Contains(progress.String(), "jobs/s") {
		t.Fatalf("no progress lines:\n%s", progress.String())
	}
	s, err := bench.Settings(ctx, pool)
	if err != nil || !strings.Contains(s, "synchronous_commit=") {
		t.Fatalf("settings %q: %v", s, err)
	}
}

// checkUsage checks what a burn-down of every job of cfg reports it cost:
// every job claimed and written once, some client CPU, and server CPU
// whenever the server's processes could be read.
func checkUsage(t *testing.T, name string, r bench.Result) {
	t.Helper()
	u := r.Usage
	t.Logf("%s: %s", name, r)
	if u.Claimed != r.Jobs || u.Written != r.Jobs || u.Claims == 0 || u.Writes == 0 {
		t.Errorf("%s: %d jobs, but %d claimed in %d claims, %d written in %d writes", name, r.Jobs, u.Claimed, u.Claims, u.Written, u.Writes)
	}
	if u.Statements < u.Claims+u.Writes || u.ClientCPU <= 0 {
		t.Errorf("%s: %d statements, client CPU %s", name, u.Statements, u.ClientCPU)
	}
	// The suite's own server runs on this machine, so its backends must
	// be readable; one DATABASE_URL names may be elsewhere.
	if !u.ServerMeasured && pgtest.Shared().Source() == pgtest.SourceLocal {
		t.Errorf("%s: the suite's own server, but not measured", name)
	}
	// Without schedstat the CPU is in whole ticks per process, and a
	// short run's backends may each read none.
	if _, err := os.Stat("/proc/self/schedstat"); err == nil && u.ServerMeasured && u.ServerCPU <= 0 {
		t.Errorf("%s: server measured, but no CPU", name)
	}
	var sum int64
	for _, s := range u.ByStatement {
		sum += s.Count
	}
	if sum != u.Statements {
		t.Errorf("%s: statements by name add up to %d, not %d", name, sum, u.Statements)
	}
	if !strings.Contains(r.String(), "CPU per job: client") {
		t.Errorf("%s: report %q", name, r)
	}
}

func hasStatement(u bench.Usage, name string) bool {
	for _, s := range u.ByStatement {
		if s.Name == name && s.Count > 0 {
			return true
		}
	}
	return false
}

// TestBurnDownProcesses works a burn-down with three child processes (this
// test binary, started again) and checks that together they worked every
// job once.
func TestBurnDownProcesses(t *testing.T) {
	skipInShortMode(t, "a burn-down by three child processes")
	ctx := context.Background()
	db := pgtest.DB().NewDatabase(t)
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	cfg := &bench.Config{Pool: pool, Jobs: 2000, Workers: 20, Processes: 3, PoolConns: 4}
	if err := bench.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := bench.Enqueue(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	// Give each child time to close its pool, were it to close it before
	// the parent read its backends' CPU: that lost their CPU, and the run
	// read none.
	bench.SetBeforeServerRead(t.Cleanup, func() { time.Sleep(300 * time.Millisecond) })
	command := func(ctx context.Context, args []string) *exec.Cmd {
		c := exec.CommandContext(ctx, os.Args[0], args...)
		c.Env = append(os.Environ(), childEnv+"=1", "DATABASE_URL="+db)
		return c
	}
	res, err := bench.BurnDownProcesses(ctx, cfg, command)
	if err != nil {
		t.Fatal(err)
	}
	if res.Jobs != 2000 || res.Mode != "3x20" {
		t.Fatalf("result %+v", res)
	}
	checkUsage(t, "3 processes", res)
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pgqueue_bench.jobs WHERE kind = 'bench_noop' AND state = 'completed' AND attempt = 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2000 {
		t.Fatalf("%d jobs completed at their first attempt, want 2000", n)
	}

	// A child that fails is reported with its error.
	bad := func(ctx context.Context, args []string) *exec.Cmd {
		return command(ctx, append(args, "--workers", "0"))
	}
	if _, err := bench.BurnDownProcesses(ctx, cfg, bad); err == nil || !strings.Contains(err.Error(), "--workers") {
		t.Fatalf("failing child: %v", err)
	}
}
