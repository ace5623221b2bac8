package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/cmd/pgqueue/bench"
	"github.com/pgqueue/pgqueue/internal/limitspec"
	"github.com/pgqueue/pgqueue/internal/pgserver"
)

const benchUsage = `Usage: pgqueue bench [flags] burn-down | sustained | idle | prune | limit | sequence | workflow

Measures pgqueue on no-op jobs, in a schema of its own that it empties first
(never point --schema at real jobs):

	burn-down  insert --jobs jobs with EnqueueMany (reported as the enqueue
	           rate), then time working them with --workers workers; with
	           --raw, do the same again with bare SQL (one COPY of rows
	           prepared in advance; pgqueue's claim and a fenced batch
	           completion, no library, at the same batch size) and print
	           library/raw for both; with --processes N, N client
	           processes (this binary, started again) share the work
	sustained  insert --rate jobs/s for --duration while working them, then
	           report jobs/s and enqueue→start latency p50/p95/p99 (by the
	           database clock: attempted_at - created_at), overall and per
	           --interval with the claims' time, and the jobs table (fetch
	           index, heap, dead rows, autovacuum runs) before and after;
	           then the latency by what ran beside it each second
	           (autovacuum on the jobs table, a pruner batch) and the
	           worst seconds over 25 ms, with their wall-clock time
	idle       run two idle clients on three empty queues for --duration
	           and count the statements each sends
	prune      insert --rows finished jobs, a day to eight days old, then
	           time the pruner deleting them (retention one hour), and
	           a VACUUM after it
	limit      give the queue flow limits (--max-running, --per-key with
	           --keys, --rate M/PERIOD), enqueue --jobs jobs (spread over
	           --keys partition keys), and work them with --processes
	           child processes of --workers workers whose jobs take
	           --job-duration, until all are done or --duration passed;
	           report jobs/s against the ideal (the slots the limits leave
	           over the job duration, or the rate), the peak running jobs
	           and, with --rate, the most starts in any window and the
	           starts per period, all by the database; with --baseline,
	           also the same queue without limits, alternating, and the
	           ratio
	sequence   enqueue --sequences sequences of --per-sequence jobs each,
	           work them as limit does, report jobs/s and check from the
	           database that each sequence ran one job at a time, in order
	workflow   time --jobs independent jobs (default 10000), then the same
	           number as one workflow of each --shape, worked by one client
	           of --workers workers (default 100); report each shape's
	           jobs/s against the independent jobs' and, by the database,
	           the time from a job's last parent completing to its start
	           (p50, p95, max); with --rounds, alternating; each variant
	           first runs once untimed (up to 2000 jobs): a process's
	           first runs are slower

Every report starts with the server settings that decide throughput.
Without a database URL it starts a throwaway server from the local
binaries, with fsync, full_page_writes and autovacuum on, as in
production (--unsafe-fsync-off turns the first two off: figures from it
are a ceiling, not a promise).

Each burn-down and sustained run reports what it cost per job on both
sides: the client's CPU (getrusage: the process's, or the sum of the
child processes', less the server sampler's own thread), the CPU of the server backends that served the run's
connections (read from /proc/<pid>/stat, found in pg_stat_activity by the
run's application_name; only for a server on this machine) and, apart,
the server's background processes meanwhile (postmaster, walwriter,
checkpointer, background writer, autovacuum: shared by every database of
the server); the statements the run's pool sent (a pgx tracer), per job
and by name; and the average claim and result-write batch (the client's
Observer).

Flags:

	--database-url URL  database to use (default: $DATABASE_URL;
	                    none: a throwaway server)
	--unsafe-fsync-off  the throwaway server runs with fsync and
	                    full_page_writes off
	--schema NAME       schema for the run (default "pgqueue_bench")
	--jobs N            burn-down jobs (default 500000)
	--workers N         the client's MaxWorkers (default 1000)
	--claim-ahead D     the clients' Config.ClaimAheadWindow (default: the
	                    library's; negative: only a claim's round trip)
	--raw               burn-down: also run the raw-SQL ceiling
	--raw-conns N       connections the raw run uses (default 2)
	--processes N       burn-down: N client processes of --workers workers
	                    each share the work (default 1: in this process);
	                    limit, sequence: always child processes (default 4,
	                    of --workers 20 each)
	--layouts LIST      burn-down: compare process layouts, each
	                    PROCESSESxWORKERS, e.g. 1x1000,4x100,8x50, every one
	                    in child processes; with --rounds, alternating.
	                    PROCESSESxWORKERS@D sets that layout's ClaimAhead
	                    (4x100@-1ns against 4x100@500ms, say)
	--rounds N          burn-down, limit: run the variants (library and
	                    raw, or the layouts; limited and baseline) N times,
	                    the order reversed every other round, then print
	                    each round's ratios (default 1)
	--pool-conns N      connections of each client's pool (default 16 in
	                    this process; with child processes
	                    max(6, 16/processes) each)
	--rate N            sustained: jobs offered per second (default 2000);
	                    limit: the queue's rate limit, M/PERIOD (600/1m)
	--duration D        sustained and idle: how long (default 30s); limit
	                    and sequence: the longest a run lasts
	--max-running N     limit: the queue's MaxRunning
	--per-key N         limit: the queue's MaxRunningPerKey (needs --keys)
	--keys N            limit: spread the jobs over N partition keys
	--baseline          limit: also run the same jobs without limits
	--job-duration D    limit, sequence: each job sleeps D (default 50ms)
	--sequences N       sequence: how many sequence keys (default 100)
	--per-sequence N    sequence: jobs per sequence key (default 100)
	--shape LIST        workflow: fan-out (1 → the rest), fan-in (the rest
	                    → 1; at most 10001 jobs), layered (20 layers, each
	                    job after 3 of the layer above), chain, or all
	                    (default)
	--interval D        sustained: the report's interval (default 1m)
	--retention D       sustained, burn-down: the client prunes finished
	                    jobs older than D, at the library's default prune
	                    interval, as in service
	--filler N          add N finished and future rows first (default 0)
	--rows N            prune: the backlog of finished jobs (default 5000000)
	--prune-backlog N   burn-down, sustained: add N finished jobs, a day to
	                    eight days old, first (default 0)
	--prune             burn-down, sustained: the client prunes finished
	                    jobs an hour old while it works (the backlog); without
	                    it (or --retention), it keeps every finished job
	--pg-stat-statements
	                    burn-down, sustained, workflow: also report what each
	                    statement cost the server, per job, by
	                    pg_stat_statements (reset at each timed run's start;
	                    every statement of the run's database). The
	                    throwaway server then preloads it, with
	                    track_planning on; a --database-url server must
	                    preload it itself
	--server-setting NAME=VALUE
	                    the throwaway server runs with this setting (may be
	                    repeated): autovacuum_naptime=10s, say
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
	// limit and sequence runs
	limits                 pgqueue.QueueLimits
	keys                   int
	baseline               bool
	jobDuration            time.Duration
	sequences, perSequence int
	duration               time.Duration
	interval               time.Duration
	filler                 int
	profile                string
	processes              int
	layouts                []layout
	rounds                 int
	poolConns              int
	unsafe                 bool
	ahead                  time.Duration
	// the pruner
	rows, pruneBacklog int
	prune              bool
	retention          time.Duration
	// workflow runs
	shapes []string
	// pg_stat_statements, and the throwaway server's extra settings
	statStatements bool
	serverSettings settingFlag
}

// settingFlag is a repeated NAME=VALUE flag; values may hold commas.
type settingFlag map[string]string

func (f *settingFlag) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(*f)) {
		parts = append(parts, k+"="+(*f)[k])
	}
	return strings.Join(parts, " ")
}

func (f *settingFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if k = strings.TrimSpace(k); !ok || k == "" {
		return fmt.Errorf("%q is not NAME=VALUE", s)
	}
	if *f == nil {
		*f = settingFlag{}
	}
	(*f)[k] = v
	return nil
}

// layout is one way of spreading the work: processes × workers, and the
// clients' ClaimAhead if set (ahead).
type layout struct {
	processes, workers int
	ahead              time.Duration
	aheadSet           bool
}

func (l layout) String() string {
	s := fmt.Sprintf("%dx%d", l.processes, l.workers)
	if l.aheadSet {
		s += "@" + l.ahead.String()
	}
	return s
}

// parseLayouts reads "1x1000,4x100,4x100@-1ns".
func parseLayouts(s string) ([]layout, error) {
	var out []layout
	for _, part := range strings.Split(s, ",") {
		spec, ahead, hasAhead := strings.Cut(strings.TrimSpace(part), "@")
		p, w, ok := strings.Cut(spec, "x")
		np, err1 := strconv.Atoi(p)
		nw, err2 := strconv.Atoi(w)
		if !ok || err1 != nil || err2 != nil || np < 1 || nw < 1 {
			return nil, usagef("--layouts: %q is not PROCESSESxWORKERS[@CLAIMAHEAD]", part)
		}
		l := layout{processes: np, workers: nw, aheadSet: hasAhead}
		if hasAhead {
			d, err := time.ParseDuration(ahead)
			if err != nil || d == 0 {
				return nil, usagef("--layouts: %q: the ClaimAhead after @ must be a non-zero duration", part)
			}
			l.ahead = d
		}
		out = append(out, l)
	}
	return out, nil
}

func parseBenchArgs(args []string) (benchArgs, error) {
	var a benchArgs
	fs := newFlagSet("bench")
	a.register(fs, "pgqueue_bench")
	fs.IntVar(&a.jobs, "jobs", 500_000, "")
	fs.IntVar(&a.workers, "workers", 1000, "")
	fs.BoolVar(&a.raw, "raw", false, "")
	fs.IntVar(&a.rawConns, "raw-conns", 2, "")
	rate := fs.String("rate", "2000", "")
	fs.IntVar(&a.limits.MaxRunning, "max-running", 0, "")
	fs.IntVar(&a.limits.MaxRunningPerKey, "per-key", 0, "")
	fs.IntVar(&a.keys, "keys", 0, "")
	fs.BoolVar(&a.baseline, "baseline", false, "")
	fs.DurationVar(&a.jobDuration, "job-duration", 50*time.Millisecond, "")
	fs.IntVar(&a.sequences, "sequences", 100, "")
	fs.IntVar(&a.perSequence, "per-sequence", 100, "")
	fs.DurationVar(&a.duration, "duration", 30*time.Second, "")
	fs.DurationVar(&a.interval, "interval", time.Minute, "")
	fs.IntVar(&a.filler, "filler", 0, "")
	fs.StringVar(&a.profile, "cpuprofile", "", "")
	fs.IntVar(&a.rows, "rows", 5_000_000, "")
	fs.IntVar(&a.pruneBacklog, "prune-backlog", 0, "")
	fs.BoolVar(&a.prune, "prune", false, "")
	fs.DurationVar(&a.retention, "retention", 0, "")
	fs.IntVar(&a.processes, "processes", 1, "")
	layouts := fs.String("layouts", "", "")
	fs.IntVar(&a.rounds, "rounds", 1, "")
	fs.IntVar(&a.poolConns, "pool-conns", 0, "")
	fs.DurationVar(&a.ahead, "claim-ahead", 0, "")
	fs.BoolVar(&a.unsafe, "unsafe-fsync-off", false, "")
	shape := fs.String("shape", "all", "")
	fs.BoolVar(&a.statStatements, "pg-stat-statements", false, "")
	fs.Var(&a.serverSettings, "server-setting", "")
	pos, err := parseInterspersed(fs, args)
	switch {
	case err != nil:
		return a, err
	case len(pos) != 1:
		return a, usagef("bench takes one mode: burn-down, sustained, idle, prune, limit, sequence or workflow")
	case !slices.Contains([]string{"burn-down", "sustained", "idle", "prune", "limit", "sequence", "workflow"}, pos[0]):
		return a, usagef("unknown bench mode %q", pos[0])
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := a.parseWorkflow(pos[0], set, *shape); err != nil {
		return a, err
	}
	flow := pos[0] == "limit" || pos[0] == "sequence"
	if err := a.parseFlow(pos[0], set, *rate); err != nil {
		return a, err
	}
	switch {
	case a.jobs < 1 || a.workers < 1 || a.rawConns < 1 || a.filler < 0:
		return a, usagef("--jobs, --workers, --raw-conns and --rate must be at least 1, --filler not negative")
	case a.rows < 1 || a.pruneBacklog < 0:
		return a, usagef("--rows must be at least 1, --prune-backlog not negative")
	case (a.pruneBacklog > 0 || a.prune || a.retention != 0 || a.filler > 0) && flow:
		return a, usagef("--prune-backlog, --prune, --retention and --filler do not go with limit and sequence")
	case (a.pruneBacklog > 0 || a.prune || a.retention != 0) && pos[0] != "burn-down" && pos[0] != "sustained":
		return a, usagef("--prune-backlog, --prune and --retention go with burn-down and sustained")
	case (a.pruneBacklog > 0 || a.prune || a.retention != 0) && a.raw:
		return a, usagef("--prune-backlog, --prune and --retention do not go with --raw, which measures bare SQL")
	case a.retention < 0:
		return a, usagef("--retention must be positive, got %s", a.retention)
	case a.duration <= 0 || a.interval <= 0:
		return a, usagef("--duration and --interval must be positive")
	case a.processes < 1 || a.rounds < 1 || a.poolConns < 0:
		return a, usagef("--processes and --rounds must be at least 1, --pool-conns not negative")
	case a.processes > 1 && pos[0] == "workflow":
		return a, usagef("--processes does not go with workflow: one client works the workflow")
	case (a.processes > 1 || a.rounds > 1) && pos[0] != "burn-down" && pos[0] != "workflow" && !flow:
		return a, usagef("--processes and --rounds go with burn-down, limit and sequence (--rounds with workflow too)")
	case *layouts != "" && pos[0] != "burn-down":
		return a, usagef("--layouts goes with burn-down")
	case a.profile != "" && flow:
		return a, usagef("--cpuprofile profiles this process, not the child processes of limit and sequence")
	case (a.processes > 1 || *layouts != "") && a.raw:
		return a, usagef("--processes and --layouts do not go with --raw: compare layouts with each other")
	case a.statStatements && (pos[0] != "burn-down" && pos[0] != "sustained" && pos[0] != "workflow" || a.processes > 1 || *layouts != ""):
		return a, usagef("--pg-stat-statements goes with burn-down (in this process), sustained and workflow")
	case len(a.serverSettings) > 0 && a.databaseURL != "":
		return a, usagef("--server-setting sets the throwaway server's settings: leave out --database-url and DATABASE_URL")
	case a.processes > 1 && *layouts != "":
		return a, usagef("--processes and --layouts: give one or the other")
	case (a.processes > 1 || *layouts != "") && a.profile != "":
		return a, usagef("--cpuprofile profiles this process, not child processes: leave out --processes and --layouts")
	}
	if *layouts != "" {
		if a.layouts, err = parseLayouts(*layouts); err != nil {
			return a, err
		}
	}
	a.mode = pos[0]
	return a, a.checkSchema()
}

// parseFlow reads the flags of the limit and sequence modes, which have
// defaults of their own, and --rate, which is a rate limit (M/PERIOD) for
// limit and jobs per second for sustained. set names the flags given.
func (a *benchArgs) parseFlow(mode string, set map[string]bool, rate string) error {
	flowOnly := []string{"max-running", "per-key", "keys", "baseline", "job-duration", "sequences", "per-sequence"}
	if mode != "limit" {
		for _, name := range flowOnly[:4] {
			if set[name] {
				return usagef("--%s goes with limit", name)
			}
		}
	}
	if mode != "limit" && mode != "sequence" {
		for _, name := range flowOnly[4:] {
			if set[name] {
				return usagef("--%s goes with limit and sequence", name)
			}
		}
		n, err := strconv.Atoi(rate)
		if err != nil || n < 1 {
			return usagef("--rate must be a whole number of jobs per second, at least 1, got %q", rate)
		}
		a.rate = n
		return nil
	}
	if mode == "sequence" && (set["sequences"] || set["per-sequence"]) && set["jobs"] {
		return usagef("sequence: give --sequences and --per-sequence, not --jobs")
	}
	if mode == "sequence" && set["rate"] {
		return usagef("--rate goes with limit (a rate limit) and sustained (jobs offered per second)")
	}
	if !set["processes"] {
		a.processes = 4
	}
	if !set["workers"] {
		a.workers = 20
	}
	if !set["jobs"] {
		a.jobs = 100_000
	}
	switch {
	case a.jobDuration < 0:
		return usagef("--job-duration must not be negative, got %s", a.jobDuration)
	case mode == "sequence" && (a.sequences < 1 || a.perSequence < 1):
		return usagef("--sequences and --per-sequence must be at least 1")
	case mode == "sequence":
		a.jobs = a.sequences * a.perSequence
		return nil
	case set["max-running"] && a.limits.MaxRunning < 1, set["per-key"] && a.limits.MaxRunningPerKey < 1, a.keys < 0:
		return usagef("--max-running and --per-key must be at least 1, --keys not negative")
	case a.limits.MaxRunningPerKey > 0 && a.keys == 0:
		return usagef("--per-key limits each partition key: give the jobs --keys")
	}
	if set["rate"] {
		limit, period, err := limitspec.ParseRate(rate)
		if err != nil {
			return usagef("--rate: %v", err)
		}
		a.limits.Rate = pgqueue.Rate{Limit: limit, Period: period}
	}
	if !a.limits.Limited() {
		return usagef("limit needs a limit: --max-running, --per-key (with --keys) or --rate M/PERIOD")
	}
	return nil
}

// parseWorkflow reads --shape, which goes with the workflow mode only, and
// sets that mode's defaults: 10,000 jobs, 100 workers.
func (a *benchArgs) parseWorkflow(mode string, set map[string]bool, shape string) error {
	if mode != "workflow" {
		if set["shape"] {
			return usagef("--shape goes with workflow")
		}
		return nil
	}
	if set["raw"] || set["layouts"] || set["filler"] || set["prune"] || set["prune-backlog"] || set["retention"] {
		return usagef("workflow takes --jobs, --workers, --shape, --rounds, --pool-conns and --claim-ahead")
	}
	if !set["jobs"] {
		a.jobs = 10_000
	}
	if !set["workers"] {
		a.workers = 100
	}
	shapes, err := parseShapes(shape)
	a.shapes = shapes
	return err
}

// runBench is the bench command.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == benchChildMode {
		return runBenchChild(ctx, args[1:], stdout, stderr)
	}
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

// benchServer returns the database to measure: the URL given, or a
// throwaway server with production's durability (fsync, full_page_writes)
// and autovacuum on, unless unsafe, with extra settings over those.
func benchServer(ctx context.Context, databaseURL string, unsafe bool, extra map[string]string, stderr io.Writer) (string, func() error, error) {
	if databaseURL != "" {
		return databaseURL, func() error { return nil }, nil
	}
	settings := map[string]string{"fsync": "on", "full_page_writes": "on", "autovacuum": "on"}
	if unsafe {
		settings["fsync"], settings["full_page_writes"] = "off", "off"
	}
	maps.Copy(settings, extra)
	fmt.Fprintln(stderr, "no --database-url or DATABASE_URL: starting a throwaway PostgreSQL server")
	local, err := pgserver.Start(ctx, pgserver.Options{Settings: settings})
	if err != nil {
		return "", nil, fmt.Errorf("start a throwaway server: %w", err)
	}
	fmt.Fprintf(stderr, "using the throwaway server on 127.0.0.1:%d (data in %s, removed at the end)\n", local.Port(), local.DataDir())
	release := func() error {
		if err := local.Close(); err != nil {
			return fmt.Errorf("stop the throwaway server: %w", err)
		}
		return nil
	}
	return local.ConnString("postgres"), release, nil
}

func runBenchMode(ctx context.Context, a benchArgs, stdout, stderr io.Writer) (err error) {
	extra := map[string]string{}
	maps.Copy(extra, a.serverSettings)
	if a.statStatements && a.databaseURL == "" {
		extra["shared_preload_libraries"] = "pg_stat_statements"
		extra["pg_stat_statements.track_planning"] = "on"
	}
	connString, release, err := benchServer(ctx, a.databaseURL, a.unsafe, extra, stderr)
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
	fmt.Fprintf(stdout, "machine: %d CPUs, load average %s\n", runtime.NumCPU(), loadAverage())
	cfg := &bench.Config{
		Pool: pool, Schema: a.schema, Jobs: a.jobs, Workers: a.workers, RawConns: a.rawConns,
		Rate: a.rate, Duration: a.duration, Interval: a.interval, Filler: a.filler, Progress: stderr,
		PruneBacklog: a.pruneBacklog, Prune: a.prune, Retention: a.retention, PoolConns: a.poolConns,
		ClaimAhead: a.ahead, StatStatements: a.statStatements,
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
	if a.retention > 0 {
		fmt.Fprintf(stdout, "pruning while it works: every state's retention %s, the library's default prune interval\n", a.retention)
	} else if a.prune {
		fmt.Fprintln(stdout, "pruning while it works: every state's retention one hour")
	}
	if a.prune && a.retention == 0 {
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
		fmt.Fprintln(stdout, "           "+res.Usage.StatementsLine())
		printStatStatements(stdout, res)
		fmt.Fprintln(stdout, bench.SustainedReport(res))
	case "limit", "sequence":
		return runFlow(ctx, a, cfg, connString, stdout)
	case "workflow":
		return runWorkflowBench(ctx, a, cfg, stdout)
	default:
		return runBurnDown(ctx, a, cfg, connString, stdout)
	}
	return nil
}

// burnVariant is one thing a burn-down round times.
type burnVariant struct {
	name string
	run  func(ctx context.Context) (enq, res bench.Result, err error)
}

// runBurnDown runs the burn-down's variants --rounds times, reversing
// their order every other round, and prints each run and each round's
// ratios to the first variant.
func runBurnDown(ctx context.Context, a benchArgs, cfg *bench.Config, connString string, stdout io.Writer) error {
	var variants []burnVariant
	inProcess := func(ctx context.Context) (enq, res bench.Result, err error) {
		if err := bench.Prepare(ctx, cfg); err != nil {
			return enq, res, err
		}
		stopProfile, err := startProfile(a.profile)
		if err != nil {
			return enq, res, err
		}
		defer stopProfile()
		if enq, err = bench.Enqueue(ctx, cfg); err != nil {
			return enq, res, err
		}
		res, err = bench.BurnDown(ctx, cfg)
		return enq, res, err
	}
	raw := func(ctx context.Context) (enq, res bench.Result, err error) {
		if err := bench.Prepare(ctx, cfg); err != nil {
			return enq, res, err
		}
		if enq, err = bench.RawEnqueue(ctx, cfg); err != nil {
			return enq, res, err
		}
		res, err = bench.RawBurnDown(ctx, cfg)
		return enq, res, err
	}
	layouts := a.layouts
	if a.processes > 1 {
		layouts = []layout{{processes: a.processes, workers: a.workers}}
	}
	if len(layouts) > 0 {
		command, err := benchChildCommand(connString)
		if err != nil {
			return err
		}
		for _, l := range layouts {
			variants = append(variants, burnVariant{l.String(), func(ctx context.Context) (enq, res bench.Result, err error) {
				lc := *cfg
				lc.Processes, lc.Workers = l.processes, l.workers
				if l.aheadSet {
					lc.ClaimAhead = l.ahead
				}
				if lc.PoolConns == 0 {
					lc.PoolConns = max(6, 16/l.processes)
				}
				if err := bench.Prepare(ctx, &lc); err != nil {
					return enq, res, err
				}
				if enq, err = bench.Enqueue(ctx, &lc); err != nil {
					return enq, res, err
				}
				res, err = bench.BurnDownProcesses(ctx, &lc, command)
				return enq, res, err
			}})
		}
		fmt.Fprintf(stdout, "burn-down: %d jobs; layouts (processes x workers, each process its own pool): %v\n", a.jobs, layouts)
	} else {
		variants = append(variants, burnVariant{"library", inProcess})
		if a.raw {
			variants = append(variants, burnVariant{"raw", raw})
		}
		fmt.Fprintf(stdout, "burn-down: %d jobs, %d workers\n", a.jobs, a.workers)
	}

	type run struct{ enq, res bench.Result }
	rounds := make([]map[string]run, a.rounds)
	for r := range a.rounds {
		rounds[r] = map[string]run{}
		for _, v := range roundOrder(stdout, variants, r, a.rounds) {
			enq, res, err := v.run(ctx)
			if err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			fmt.Fprintln(stdout, enq)
			fmt.Fprintln(stdout, res)
			fmt.Fprintln(stdout, "           "+res.Usage.StatementsLine())
			printStatStatements(stdout, res)
			rounds[r][v.name] = run{enq, res}
		}
		if lib, ok := rounds[r]["library"]; ok && a.raw {
			raw := rounds[r]["raw"]
			fmt.Fprintf(stdout, "library/raw: enqueue %.2f, burn-down %.2f; server CPU per job %.2f\n",
				lib.enq.JobsPerSecond()/raw.enq.JobsPerSecond(), lib.res.JobsPerSecond()/raw.res.JobsPerSecond(),
				ratio(lib.res.Usage.ServerCPU, lib.res.Jobs, raw.res.Usage.ServerCPU, raw.res.Jobs))
		}
	}
	if len(variants) < 2 && a.rounds < 2 {
		return nil
	}
	// The summary: per round, each variant against the first.
	first := variants[0].name
	fmt.Fprintf(stdout, "\n%-6s %-10s %10s %8s %12s %12s %12s %10s\n", "round", "variant", "jobs/s", "ratio", "client µs/j", "server µs/j", "backgr µs/j", "stmts/job")
	for r, runs := range rounds {
		for _, v := range variants {
			x := runs[v.name].res
			u := x.Usage
			fmt.Fprintf(stdout, "%-6d %-10s %10.0f %8.2f %12.1f %12.1f %12.1f %10.4f\n", r+1, v.name, x.JobsPerSecond(),
				x.JobsPerSecond()/runs[first].res.JobsPerSecond(), perJob(u.ClientCPU, x.Jobs), perJob(u.ServerCPU, x.Jobs),
				perJob(u.Background, x.Jobs), float64(u.Statements)/float64(max(x.Jobs, 1)))
		}
	}
	return nil
}

// printStatStatements prints the run's pg_stat_statements figures, if it
// has them.
func printStatStatements(stdout io.Writer, res bench.Result) {
	if res.Usage.ServerStatements != nil {
		fmt.Fprintln(stdout, bench.StatStatementsReport(res.Usage.ServerStatements, res.Jobs, 10))
	}
}

func perJob(d time.Duration, jobs int64) float64 {
	return float64(d.Nanoseconds()) / 1e3 / float64(max(jobs, 1))
}

// ratio is a's CPU per job over b's.
func ratio(a time.Duration, aJobs int64, b time.Duration, bJobs int64) float64 {
	if b <= 0 {
		return 0
	}
	return perJob(a, aJobs) / perJob(b, bJobs)
}

// loadAverage is the machine's 1, 5 and 15 minute load, for the report:
// on a shared machine the figures mean little without it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
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

// roundOrder is the order of the variants in round r of rounds: reversed
// every other round, so that neither always runs first on a machine whose
// speed drifts. With several rounds it says which one starts.
func roundOrder[T any](stdout io.Writer, variants []T, r, rounds int) []T {
	order := slices.Clone(variants)
	if r%2 == 1 {
		slices.Reverse(order)
	}
	if rounds > 1 {
		fmt.Fprintf(stdout, "round %d (load average %s)\n", r+1, loadAverage())
	}
	return order
}
