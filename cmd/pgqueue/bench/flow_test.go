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

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/cmd/pgqueue/bench"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

func TestWindowStarts(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	at := func(ms ...int) []time.Time {
		out := make([]time.Time, len(ms))
		for i, m := range ms {
			out[i] = t0.Add(time.Duration(m) * time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		starts    []time.Time
		maxIn     int
		perPeriod []int
	}{
		{"None", nil, 0, nil},
		{"OneBurst", at(0, 1, 2), 3, []int{}},
		// A start exactly a period after another is in the next window:
		// the limit counts starts after at - period.
		{"BurstEachPeriod", at(0, 1, 2, 1000, 1001, 1002, 2000), 3, []int{3, 3}},
		{"Sliding", at(0, 600, 900, 1100, 1500), 4, []int{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			maxIn, per := bench.WindowStarts(tc.starts, time.Second)
			if maxIn != tc.maxIn || fmt.Sprint(per) != fmt.Sprint(tc.perPeriod) {
				t.Fatalf("got %d, %v; want %d, %v", maxIn, per, tc.maxIn, tc.perPeriod)
			}
		})
	}
}

// TestFlow runs each kind of limit, and sequences, small with two child
// processes (this test binary, started again) and checks what the
// database says the limits kept.
func TestFlow(t *testing.T) {
	skipInShortMode(t, "limit and sequence runs by two child processes, a few seconds each")
	t.Parallel()
	ctx := context.Background()
	command := func(db string) bench.ChildCommand {
		return func(ctx context.Context, args []string) *exec.Cmd {
			c := exec.CommandContext(ctx, os.Args[0], args...)
			c.Env = append(os.Environ(), childEnv+"=1", "DATABASE_URL="+db)
			return c
		}
	}
	setup := func(t *testing.T, cfg *bench.Config) (*bench.Config, bench.ChildCommand) {
		db := pgtest.DB().NewDatabase(t)
		pool, err := pgxpool.New(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		cfg.Pool, cfg.Processes, cfg.Workers, cfg.PoolConns = pool, 2, 5, 4
		cfg.JobDuration = 10 * time.Millisecond
		return cfg, command(db)
	}

	t.Run("MaxRunning", func(t *testing.T) {
		t.Parallel()
		cfg, cmd := setup(t, &bench.Config{Jobs: 200})
		r, err := bench.Flow(ctx, cfg, pgqueue.QueueLimits{MaxRunning: 3}, cmd)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s\n%s", r.Result, r.Report())
		if r.Result.Jobs != 200 || r.Finished != 200 || r.PeakRunning != 3 || r.Ideal != 300 || r.Ratio() <= 0 || r.Ratio() > 1.05 {
			t.Fatalf("%d jobs, %d finished, peak running %d (limit 3), ideal %.0f, ratio %.2f", r.Result.Jobs, r.Finished, r.PeakRunning, r.Ideal, r.Ratio())
		}
		if !strings.Contains(r.Report(), "(limit 3)") {
			t.Fatalf("report:\n%s", r.Report())
		}
	})

	t.Run("MaxRunningPerKey", func(t *testing.T) {
		t.Parallel()
		cfg, cmd := setup(t, &bench.Config{Jobs: 100, Keys: 4})
		r, err := bench.Flow(ctx, cfg, pgqueue.QueueLimits{MaxRunningPerKey: 1}, cmd)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s\n%s", r.Result, r.Report())
		if r.Finished != 100 || r.PeakPerKey != 1 || r.PeakRunning > 4 || r.Ideal != 400 {
			t.Fatalf("%d finished, peak per key %d (limit 1), peak running %d (4 keys), ideal %.0f", r.Finished, r.PeakPerKey, r.PeakRunning, r.Ideal)
		}
	})

	t.Run("Rate", func(t *testing.T) {
		t.Parallel()
		// Two whole periods and a bit: 3 bursts of 20, the run stopped
		// with the backlog left.
		cfg, cmd := setup(t, &bench.Config{Jobs: 200, StopAfter: 2300 * time.Millisecond})
		r, err := bench.Flow(ctx, cfg, pgqueue.QueueLimits{Rate: pgqueue.Rate{Limit: 20, Period: time.Second}}, cmd)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s\n%s", r.Result, r.Report())
		if r.MaxStarts > 20 || len(r.PeriodStarts) < 1 || r.Result.Jobs >= 200 || r.Ideal != 20 || r.Ratio() > 1 {
			t.Fatalf("at most %d starts in a window (limit 20), per period %v, %d jobs, ideal %.0f", r.MaxStarts, r.PeriodStarts, r.Result.Jobs, r.Ideal)
		}
		for _, n := range r.PeriodStarts {
			if n > 20 || n == 0 {
				t.Fatalf("per period %v, want up to 20, none empty", r.PeriodStarts)
			}
		}
		if !strings.Contains(r.Report(), "rate 20/1s") {
			t.Fatalf("report:\n%s", r.Report())
		}
	})

	t.Run("Sequences", func(t *testing.T) {
		t.Parallel()
		cfg, cmd := setup(t, &bench.Config{Jobs: 15, Sequences: 3})
		r, err := bench.Flow(ctx, cfg, pgqueue.QueueLimits{}, cmd)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s\n%s", r.Result, r.Report())
		if r.Sequences != 3 || r.SeqCompleted != 15 || r.OutOfOrder != 0 || r.Ideal != 300 {
			t.Fatalf("%d sequences, %d completed, %d out of order, ideal %.0f", r.Sequences, r.SeqCompleted, r.OutOfOrder, r.Ideal)
		}
		if !strings.Contains(r.Report(), "order kept") {
			t.Fatalf("report:\n%s", r.Report())
		}
	})
}
