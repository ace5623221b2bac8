package bench_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/bench"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

func TestMain(m *testing.M) {
	os.Exit(pgtest.Main(m, func(context.Context, string) error { return nil }))
}

// TestRuns runs each benchmark mode small and checks it worked every job.
func TestRuns(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.DB().NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var progress strings.Builder
	cfg := &bench.Config{Pool: pool, Jobs: 3000, Workers: 50, RawConns: 2, Filler: 1000, Rate: 500, Duration: time.Second, Progress: &progress}

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
	if !strings.Contains(progress.String(), "jobs/s") {
		t.Fatalf("no progress lines:\n%s", progress.String())
	}
	s, err := bench.Settings(ctx, pool)
	if err != nil || !strings.Contains(s, "synchronous_commit=") {
		t.Fatalf("settings %q: %v", s, err)
	}
}
