package bench_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue/cmd/pgqueue/bench"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

// TestPruneRuns runs the prune mode and a sustained run that prunes, small,
// and checks what each deleted and kept.
func TestPruneRuns(t *testing.T) {
	skipInShortMode(t, "the prune mode and a pruning sustained run")
	ctx := context.Background()
	pool := pgtest.DB().NewPool(t)
	count := func(where string) int {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pgqueue_bench.jobs WHERE "+where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var progress strings.Builder
	cfg := &bench.Config{Pool: pool, Workers: 50, Filler: 1000, PruneBacklog: 5000, Progress: &progress}

	if err := bench.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if n := count("kind = 'bench_pruned' AND state IN ('completed', 'cancelled', 'discarded')"); n != 5000 {
		t.Fatalf("backlog of %d, want 5000", n)
	}
	res, err := bench.Prune(ctx, cfg)
	if err != nil || res.Rows != 5000 || res.Elapsed <= 0 || res.HeapBefore == 0 {
		t.Fatalf("prune: %v, %+v", err, res)
	}
	// The filler's finished rows are younger than the retention.
	if n, filler := count("kind = 'bench_pruned'"), count("kind = 'bench_filler'"); n != 0 || filler != 1000 {
		t.Fatalf("after the prune: %d of the backlog left, %d filler rows, want 0 and 1000", n, filler)
	}
	if !strings.Contains(res.String(), "rows/s") {
		t.Fatalf("report %q", res)
	}

	// Fewer rows than one prune statement deletes: the pruner, which
	// prunes at the start of its term, deletes them all at once. With
	// 3,000 (three batches, each followed by a rest as long as it took)
	// the run of one second ended, under load, after the first batch.
	cfg.Filler, cfg.PruneBacklog, cfg.Prune = 0, 900, true
	cfg.Rate, cfg.Duration = 500, 2*time.Second
	if err := bench.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	sus, err := bench.Sustained(ctx, cfg)
	if err != nil || sus.Jobs == 0 || sus.Jobs != sus.Offered {
		t.Fatalf("sustained: %v, %+v", err, sus)
	}
	left, err := bench.BacklogLeft(ctx, cfg)
	if err != nil || left != 0 {
		t.Fatalf("%d of the backlog left after the sustained run (%v), want 0", left, err)
	}
	if n := count("kind = 'bench_noop' AND state = 'completed'"); n != int(sus.Jobs) {
		t.Fatalf("%d of the run's %d jobs kept", n, sus.Jobs)
	}

	// Without Prune, the client keeps even the backlog.
	cfg.Prune = false
	if err := bench.Prepare(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := bench.Sustained(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if left, err := bench.BacklogLeft(ctx, cfg); err != nil || left != 900 {
		t.Fatalf("%d of the backlog left without pruning (%v), want 900", left, err)
	}
}
