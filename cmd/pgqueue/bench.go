package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/bench"
)

const benchUsage = `Usage: pgqueue bench [flags] burn-down | sustained | idle | prune

Measures pgqueue on no-op jobs, in a schema of its own that it empties first
(never point --schema at real jobs):

	burn-down  insert --jobs jobs with EnqueueMany (reported as the enqueue
	           rate), then time working them with --workers workers; with
	           --raw, do the same again with bare SQL (one COPY of rows
	           prepared in advance; pgqueue's claim and a fenced batch
	           completion, no library, at the same batch size) and print
	           library/raw for both
	sustained  insert --rate jobs/s for --duration while working them, then
	           report jobs/s and enqueue→start latency p50/p95/p99 (by the
	           database clock: attempted_at - created_at)
	idle       run two idle clients on three empty queues for --duration
	           and count the statements each sends
	prune      insert --rows finished jobs, a day to eight days old, then
	           time the pruner deleting them (retention one hour), and
	           a VACUUM after it

Every report starts with the server settings that decide throughput.
Without a database URL it starts a throwaway server from the local
binaries (fsync off: figures from it are a ceiling, not a promise).

Flags:

	--database-url URL  database to use (default: $DATABASE_URL;
	                    none: a throwaway server)
	--schema NAME       schema for the run (default "pgqueue_bench")
	--jobs N            burn-down jobs (default 500000)
	--workers N         the client's MaxWorkers, which is also the claim
	                    batch size (default 1000)
	--raw               burn-down: also run the raw-SQL ceiling
	--raw-conns N       connections the raw run uses (default 2)
	--rate N            sustained: jobs offered per second (default 2000)
	--duration D        sustained and idle: how long (default 30s)
	--filler N          add N finished and future rows first (default 0)
	--rows N            prune: the backlog of finished jobs (default 5000000)
	--prune-backlog N   burn-down, sustained: add N finished jobs, a day to
	                    eight days old, first (default 0)
	--prune             burn-down, sustained: the client prunes finished
	                    jobs an hour old while it works (the backlog); without
	                    it, it keeps every finished job
	--cpuprofile FILE   write a CPU profile of the library's part of the
	                    run (the burn-down's enqueue and working phases, or
	                    the whole sustained run) to FILE, for go tool pprof
`

type benchArgs struct {
	dbFlags
	mode     string
	jobs     int
	workers  int
	raw      bool
	rawConns int
	rate     int
	duration time.Duration
	filler   int
	profile  string
	// the pruner
	rows, pruneBacklog int
	prune              bool
}

func parseBenchArgs(args []string) (benchArgs, error) {
	var a benchArgs
	fs := newFlagSet("bench")
	a.register(fs, "pgqueue_bench")
	fs.IntVar(&a.jobs, "jobs", 500_000, "")
	fs.IntVar(&a.workers, "workers", 1000, "")
	fs.BoolVar(&a.raw, "raw", false, "")
	fs.IntVar(&a.rawConns, "raw-conns", 2, "")
	fs.IntVar(&a.rate, "rate", 2000, "")
	fs.DurationVar(&a.duration, "duration", 30*time.Second, "")
	fs.IntVar(&a.filler, "filler", 0, "")
	fs.StringVar(&a.profile, "cpuprofile", "", "")
	fs.IntVar(&a.rows, "rows", 5_000_000, "")
	fs.IntVar(&a.pruneBacklog, "prune-backlog", 0, "")
	fs.BoolVar(&a.prune, "prune", false, "")
	pos, err := parseInterspersed(fs, args)
	switch {
	case err != nil:
		return a, err
	case len(pos) != 1:
		return a, usagef("bench takes one mode: burn-down, sustained, idle or prune")
	case pos[0] != "burn-down" && pos[0] != "sustained" && pos[0] != "idle" && pos[0] != "prune":
		return a, usagef("unknown bench mode %q", pos[0])
	case a.jobs < 1 || a.workers < 1 || a.rawConns < 1 || a.rate < 1 || a.filler < 0:
		return a, usagef("--jobs, --workers, --raw-conns and --rate must be at least 1, --filler not negative")
	case a.rows < 1 || a.pruneBacklog < 0:
		return a, usagef("--rows must be at least 1, --prune-backlog not negative")
	case (a.pruneBacklog > 0 || a.prune) && pos[0] != "burn-down" && pos[0] != "sustained":
		return a, usagef("--prune-backlog and --prune go with burn-down and sustained")
	case (a.pruneBacklog > 0 || a.prune) && a.raw:
		return a, usagef("--prune-backlog and --prune do not go with --raw, which measures bare SQL")
	case a.duration <= 0:
		return a, usagef("--duration must be positive, got %s", a.duration)
	}
	a.mode = pos[0]
	return a, a.checkSchema()
}

// runBench is the bench command.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a, err := parseBenchArgs(args)
	if err != nil {
		return parseFailed("bench", benchUsage, err, stdout, stderr)
	}
	if err := runBenchMode(ctx, a, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	return exitOK
}

func runBenchMode(ctx context.Context, a benchArgs, stdout, stderr io.Writer) (err error) {
	connString, release, err := demoServer(ctx, a.databaseURL, stderr)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, release()) }()
	pcfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	pcfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()

	settings, err := bench.Settings(ctx, pool)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "server:", settings)
	cfg := &bench.Config{
		Pool: pool, Schema: a.schema, Jobs: a.jobs, Workers: a.workers, RawConns: a.rawConns,
		Rate: a.rate, Duration: a.duration, Filler: a.filler, Progress: stderr,
		PruneBacklog: a.pruneBacklog, Prune: a.prune,
	}
	if a.mode == "prune" {
		cfg.PruneBacklog = a.rows
	}
	if err := bench.Prepare(ctx, cfg); err != nil {
		return err
	}
	if a.filler > 0 {
		fmt.Fprintf(stdout, "filler: %d finished and future rows\n", a.filler)
	}
	if cfg.PruneBacklog > 0 {
		fmt.Fprintf(stdout, "prune backlog: %d finished jobs, a day to eight days old\n", cfg.PruneBacklog)
	}
	if a.prune {
		fmt.Fprintln(stdout, "pruning while it works: every state's retention one hour")
		defer func() {
			if err == nil {
				err = reportBacklog(ctx, cfg, stdout)
			}
		}()
	}
	switch a.mode {
	case "prune":
		res, err := bench.Prune(ctx, cfg)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, res)
	case "idle":
		res, err := bench.Idle(ctx, cfg, a.duration)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, res)
	case "sustained":
		fmt.Fprintf(stdout, "sustained: %d jobs/s offered for %s, %d workers\n", a.rate, a.duration, a.workers)
		stopProfile, err := startProfile(a.profile)
		if err != nil {
			return err
		}
		res, err := bench.Sustained(ctx, cfg)
		stopProfile()
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, res)
	default:
		fmt.Fprintf(stdout, "burn-down: %d jobs, %d workers (claim batch %d)\n", a.jobs, a.workers, a.workers)
		stopProfile, err := startProfile(a.profile)
		if err != nil {
			return err
		}
		enq, err := bench.Enqueue(ctx, cfg)
		if err != nil {
			stopProfile()
			return err
		}
		fmt.Fprintln(stdout, enq)
		lib, err := bench.BurnDown(ctx, cfg)
		stopProfile()
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, lib)
		if !a.raw {
			return nil
		}
		if err := bench.Prepare(ctx, cfg); err != nil {
			return err
		}
		rawEnq, err := bench.RawEnqueue(ctx, cfg)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, rawEnq)
		raw, err := bench.RawBurnDown(ctx, cfg)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, raw)
		fmt.Fprintf(stdout, "library/raw: enqueue %.2f, burn-down %.2f\n",
			enq.JobsPerSecond()/rawEnq.JobsPerSecond(), lib.JobsPerSecond()/raw.JobsPerSecond())
	}
	return nil
}

// reportBacklog says how much of the prune backlog the run's pruner
// deleted: when none is left, it ran out of work before the run ended.
func reportBacklog(ctx context.Context, cfg *bench.Config, stdout io.Writer) error {
	left, err := bench.BacklogLeft(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "pruned during the run: %d of the backlog's %d jobs (%d left)\n", int64(cfg.PruneBacklog)-left, cfg.PruneBacklog, left)
	if left == 0 && cfg.PruneBacklog > 0 {
		fmt.Fprintln(stdout, "the pruner ran out of backlog before the run ended: raise --prune-backlog to keep it busy throughout")
	}
	return nil
}

// startProfile starts a CPU profile into path; with no path it does
// nothing. The returned stop ends the profile and closes the file.
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
