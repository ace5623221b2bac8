// Package bench measures pgqueue against the same work done with bare SQL:
// burn-down (insert N no-op jobs, then work them all), sustained (insert at
// an offered rate while working, reporting enqueue→start latency), raw
// (the burn-down with the claim and complete statements alone) and Flow (a
// queue with flow limits or sequences, worked by child processes whose
// jobs take a set time). The CLI's `pgqueue bench` prints its reports.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// Config describes one benchmark run.
type Config struct {
	// Pool is the database to run in.
	Pool *pgxpool.Pool
	// Schema is the schema the run migrates and empties. Default
	// "pgqueue_bench": never point it at real jobs.
	Schema string
	// Jobs is the burn-down's job count.
	Jobs int
	// Workers is the client's MaxWorkers: each claim takes up to this many
	// jobs, so it is also the raw run's batch size.
	Workers int
	// RawConns is how many connections the raw run claims and completes on.
	RawConns int
	// Rate is the sustained run's offered load in jobs per second.
	Rate int
	// Duration is the sustained run's length.
	Duration time.Duration
	// Filler adds this many finished and future rows before the run, to
	// show whether claims slow down as the table grows.
	Filler int
	// PruneBacklog adds this many finished jobs, past every retention,
	// before the run: work for the pruner (Prune, or a run with Prune set).
	PruneBacklog int
	// Prune has the working client prune finished jobs an hour old while
	// it works; without it the client keeps them all.
	Prune bool
	// Progress receives the live display; nil for none.
	Progress io.Writer
	// ProgressEvery is how often a progress line is written to a
	// Progress that is not a terminal; default a second.
	ProgressEvery time.Duration
	// Instrument, if set, changes the config of the clients that enqueue
	// and work (otelpgqueue's benchmark installs its instrumentation).
	Instrument func(c *pgqueue.Config) error
	// PoolConns, if set, is the size of the pool each timed run opens for
	// its client; default Pool's MaxConns.
	PoolConns int
	// ClaimAhead, if not zero, is the clients' Config.ClaimAheadWindow
	// (negative: hold only a claim's round trip ahead).
	ClaimAhead time.Duration
	// Processes is how many child processes BurnDownProcesses starts,
	// each a client with Workers workers.
	Processes int
	// Retention, if set, has the working client prune finished jobs this
	// old, of every state, at the library's default PruneInterval, as in
	// service (the sustained long run); it replaces Prune's hour.
	Retention time.Duration
	// Interval is how the sustained run's report is divided in time.
	// Default a minute.
	Interval time.Duration
	// JobDuration is how long each job's handler sleeps in the child
	// processes of BurnDownProcesses (Flow's runs); zero: no-op jobs.
	JobDuration time.Duration
	// Keys spreads the enqueued jobs over this many partition keys
	// (EnqueueOpts.PartitionKey, job i gets key i mod Keys); zero: none.
	Keys int
	// Sequences spreads the enqueued jobs over this many sequence keys
	// (EnqueueOpts.SequenceKey, job i in sequence i mod Sequences); zero:
	// none.
	Sequences int
	// StopAfter, if set, ends BurnDownProcesses after this long even if
	// jobs are left: a limited run is timed on a backlog it cannot finish.
	StopAfter time.Duration

	// StatStatements resets pg_stat_statements in the run's database at
	// the start of each timed run and reports each statement's server
	// cost after it (Usage.ServerStatements). The server must preload
	// pg_stat_statements; Prepare creates the extension.
	StatStatements bool

	sql *queries // see Config.queries
}

// Result is one measured run.
type Result struct {
	Mode string
	Jobs int64
	// Offered is how many jobs a sustained run inserted.
	Offered int64
	Elapsed time.Duration
	// Latency percentiles of enqueue→start (sustained runs only), by the
	// database clock.
	P50, P95, P99 time.Duration
	// Usage is what the timed part cost on both sides.
	Usage Usage
	// Intervals divides a sustained run by Config.Interval.
	Intervals []IntervalStats
	// Before and After are the jobs table at the start and the end of a
	// sustained run.
	Before, After TableState
	// Attribution splits a sustained run's latency by what ran beside it
	// (autovacuum on the jobs table, the pruner), second by second.
	Attribution Attribution
}

// JobsPerSecond is the run's throughput.
func (r Result) JobsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Jobs) / r.Elapsed.Seconds()
}

func (r Result) String() string {
	s := fmt.Sprintf("%-10s %9d jobs in %8.3fs = %9.0f jobs/s", r.Mode, r.Jobs, r.Elapsed.Seconds(), r.JobsPerSecond())
	if r.P50 > 0 {
		s += fmt.Sprintf("   enqueue→start p50 %s p95 %s p99 %s", round(r.P50), round(r.P95), round(r.P99))
	}
	if r.Usage.Statements > 0 {
		s += "\n           " + r.Usage.describe(r.Jobs)
	}
	return s
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }

type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "bench_noop" }

const queue = "bench"

func (cfg *Config) schema() string {
	if cfg.Schema == "" {
		return "pgqueue_bench"
	}
	return cfg.Schema
}

// Prepare migrates the schema, empties its jobs and adds the filler rows
// and the prune backlog.
func Prepare(ctx context.Context, cfg *Config) error {
	if _, err := pgqueue.Migrate(ctx, cfg.Pool, cfg.schema()); err != nil {
		return err
	}
	q, err := cfg.queries()
	if err != nil {
		return err
	}
	if _, err := cfg.Pool.Exec(ctx, q.emptyJobs); err != nil {
		// The name only for the message: the statement carries its own.
		return fmt.Errorf("empty %s: %w", pgx.Identifier{cfg.schema(), "jobs"}.Sanitize(), err)
	}
	if cfg.Filler > 0 {
		// Half finished, half due in a day: neither may slow the claim.
		if _, err := cfg.Pool.Exec(ctx, q.insertFiller, cfg.Filler, queue); err != nil {
			return fmt.Errorf("filler rows: %w", err)
		}
	}
	if cfg.StatStatements {
		if err := enableStatStatements(ctx, cfg); err != nil {
			return err
		}
	}
	if err := addPruneBacklog(ctx, cfg); err != nil {
		return err
	}
	if _, err := cfg.Pool.Exec(ctx, q.vacuumAnalyzeJobs); err != nil {
		return err
	}
	_, _ = cfg.Pool.Exec(ctx, q.checkpoint) // see settle
	return nil
}

// Enqueue inserts cfg.Jobs no-op jobs with EnqueueMany and reports the
// insert rate.
func Enqueue(ctx context.Context, cfg *Config) (Result, error) {
	pc := &pgqueue.Config{Schema: cfg.schema()}
	if cfg.Instrument != nil {
		if err := cfg.Instrument(pc); err != nil {
			return Result{}, err
		}
	}
	client, err := pgqueue.New(cfg.Pool, pc)
	if err != nil {
		return Result{}, err
	}
	params := make([]pgqueue.EnqueueManyParams, cfg.Jobs)
	opts := &pgqueue.EnqueueOpts{Queue: queue}
	for i := range params {
		o := opts
		if cfg.Keys > 0 || cfg.Sequences > 0 {
			o = &pgqueue.EnqueueOpts{Queue: queue}
			if cfg.Keys > 0 {
				o.PartitionKey = "k" + strconv.Itoa(i%cfg.Keys)
			}
			if cfg.Sequences > 0 {
				o.SequenceKey = "s" + strconv.Itoa(i%cfg.Sequences)
			}
		}
		params[i] = pgqueue.EnqueueManyParams{Args: noopArgs{N: i}, Opts: o}
	}
	start := time.Now()
	inserted, err := client.EnqueueMany(ctx, params)
	res := Result{Mode: "enqueue", Elapsed: time.Since(start)}
	if err != nil {
		return res, err
	}
	res.Jobs = inserted.Enqueued
	return res, settle(ctx, cfg)
}

// settle readies freshly inserted jobs for a timed run.
func settle(ctx context.Context, cfg *Config) error {
	q, err := cfg.queries()
	if err != nil {
		return err
	}
	// Untimed: set hint bits and give the planner the table's real size,
	// as a table in service has, so that neither run meets autovacuum or
	// an empty table's statistics halfway through.
	if _, err := cfg.Pool.Exec(ctx, q.vacuumAnalyzeJobs); err != nil {
		return err
	}
	// A checkpoint in the middle of one run and not the other would decide
	// their ratio: start each from a fresh one. It needs superuser or
	// pg_checkpoint; without them the runs are only noisier.
	_, _ = cfg.Pool.Exec(ctx, q.checkpoint)
	return nil
}

// BurnDown works the enqueued jobs with the library and times it, from
// Start until every result is written.
func BurnDown(ctx context.Context, cfg *Config) (Result, error) {
	var done atomic.Int64
	total := int64(cfg.Jobs)
	finished := make(chan struct{})
	m, err := newMeter(ctx, cfg, runApp(), true)
	if err != nil {
		return Result{}, err
	}
	defer m.close()
	client, err := noopClient(cfg, m, func(*pgqueue.Job[noopArgs]) {
		if done.Add(1) == total {
			close(finished)
		}
	})
	if err != nil {
		return Result{}, err
	}
	if err := m.start(ctx); err != nil {
		return Result{}, err
	}
	stopProgress := progress(cfg, "burn-down", func() int64 { return done.Load() }, total)
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		stopProgress()
		return Result{}, err
	}
	select {
	case <-finished:
	case <-ctx.Done():
	}
	// Stop waits for the last results to be written.
	stopErr := client.Stop(context.WithoutCancel(ctx))
	elapsed := time.Since(start)
	usage := m.stop(ctx)
	stopProgress()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	return Result{Mode: "library", Jobs: done.Load(), Elapsed: elapsed, Usage: usage}, stopErr
}

// noopClient is a client on m's pool working the bench queue with
// cfg.Workers workers whose no-op handler calls worked, its claims and
// writes counted by m.
func noopClient(cfg *Config, m *meter, worked func(*pgqueue.Job[noopArgs])) (*pgqueue.Client, error) {
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorkerFunc(workers, func(_ context.Context, job *pgqueue.Job[noopArgs]) error {
		worked(job)
		return nil
	}, nil); err != nil {
		return nil, err
	}
	pc := &pgqueue.Config{
		Schema:  cfg.schema(),
		Workers: workers,
		Queues:  map[string]pgqueue.QueueConfig{queue: {MaxWorkers: cfg.Workers}},
		Logger:  quietLogger(),
	}
	pc.ClaimAheadWindow = cfg.ClaimAhead
	setRetention(pc, cfg.Prune)
	if cfg.Retention > 0 {
		pc.CompletedJobRetention, pc.CancelledJobRetention, pc.DiscardedJobRetention = cfg.Retention, cfg.Retention, cfg.Retention
		pc.PruneInterval = 0 // the library's default
	}
	if cfg.Instrument != nil {
		if err := cfg.Instrument(pc); err != nil {
			return nil, err
		}
	}
	m.observe(pc)
	return pgqueue.New(m.pool, pc)
}

// quietLogger drops the client's logs, which would garble the display.
func quietLogger() *slogLogger { return newQuietLogger() }

// progress prints done/total every 100 ms on a terminal (one redrawn line)
// or every second elsewhere, until the returned stop is called.
func progress(cfg *Config, label string, done func() int64, total int64) (stop func()) {
	w := cfg.Progress
	if w == nil {
		return func() {}
	}
	term := isTerminal(w)
	every := time.Second
	if cfg.ProgressEvery > 0 {
		every = cfg.ProgressEvery
	}
	if term {
		every = 100 * time.Millisecond
	}
	quit := make(chan struct{})
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		var last int64
		lastAt := start
		for {
			select {
			case <-quit:
				if term {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case now := <-tick.C:
				n := done()
				rate := float64(n-last) / now.Sub(lastAt).Seconds()
				last, lastAt = n, now
				line := fmt.Sprintf("%s: %d", label, n)
				if total > 0 {
					line += fmt.Sprintf("/%d (%.0f%%)", total, 100*float64(n)/float64(total))
				}
				line += fmt.Sprintf("  %.0f jobs/s  %s", rate, time.Since(start).Round(100*time.Millisecond))
				if term {
					fmt.Fprint(w, "\r\033[K"+line)
				} else {
					fmt.Fprintln(w, line)
				}
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Settings reads the server settings that decide throughput.
func Settings(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var parts []string
	for _, name := range []string{"server_version", "synchronous_commit", "fsync", "full_page_writes", "autovacuum", "shared_buffers", "max_connections"} {
		var v string
		if err := pool.QueryRow(ctx, currentSettingSQL, name).Scan(&v); err != nil {
			return "", err
		}
		parts = append(parts, name+"="+v)
	}
	return strings.Join(parts, " "), nil
}
