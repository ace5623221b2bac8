package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgserver"
)

const demoUsage = `Usage: pgqueue demo [flags]

Enqueues a batch of jobs over three queues (emails, reports, default) with
priorities 0 to 3 and works them with one client, showing the jobs by state
as they move, then a summary read back from the database. About 10% of the
jobs are scheduled 1-5 s ahead, about 10% fail once or twice before they
succeed, and 1% fail every time and end discarded after 3 attempts. The
summary gives the throughput over the jobs due at once; the scheduled ones
are reported apart. The library's log (warnings of the planned failures)
goes to a file in the temporary directory, counted at the end.

Without a database URL the demo starts a throwaway PostgreSQL server from
the local binaries (initdb, postgres) and removes it at the end. With one,
it works in a schema of its own, emptied at the start, so that it never
mixes with real jobs; it refuses a schema holding jobs it did not enqueue.

Flags:

	--database-url URL  database to use (default: $DATABASE_URL;
	                    none: a throwaway server)
	--schema NAME       schema of the demo's tables (default "pgqueue_demo")
	--jobs N            how many jobs to enqueue (default 10000)
	--timeout D         give up with exit code 1 when the jobs are not done
	                    after D (default 2m)
`

// demoArgs is a parsed demo command line.
type demoArgs struct {
	dbFlags
	jobs    int
	timeout time.Duration
}

func parseDemoArgs(args []string) (demoArgs, error) {
	var a demoArgs
	fs := newFlagSet("demo")
	a.register(fs, "pgqueue_demo")
	fs.IntVar(&a.jobs, "jobs", 10_000, "")
	fs.DurationVar(&a.timeout, "timeout", 2*time.Minute, "")
	pos, err := parseInterspersed(fs, args)
	switch {
	case err != nil:
		return a, err
	case len(pos) > 0:
		return a, usagef("demo takes no arguments, got %q", pos)
	case a.jobs < 1:
		return a, usagef("--jobs must be at least 1, got %d", a.jobs)
	case a.timeout <= 0:
		return a, usagef("--timeout must be positive, got %s", a.timeout)
	}
	return a, a.checkSchema()
}

// runDemo is the demo command.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a, err := parseDemoArgs(args)
	if err != nil {
		return parseFailed("demo", demoUsage, err, stdout, stderr)
	}
	if err := demo(ctx, a, stdout); err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	return exitOK
}

// The demo's queues and how many of each one's jobs the client runs at once.
var demoQueues = map[string]pgqueue.QueueConfig{
	"emails":             {MaxWorkers: 20},
	"reports":            {MaxWorkers: 10},
	pgqueue.QueueDefault: {MaxWorkers: 10},
}

func demo(ctx context.Context, a demoArgs, stdout io.Writer) (err error) {
	connString, release, err := demoServer(ctx, a.databaseURL, stdout)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, release()) }()

	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	// Handlers hold no connection: this many serve the 40 of them.
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	if a.databaseURL != "" {
		fmt.Fprintf(stdout, "using database %q on %s:%d\n", cfg.ConnConfig.Database, cfg.ConnConfig.Host, cfg.ConnConfig.Port)
	}

	q, err := loadDemoQueries(a.schema)
	if err != nil {
		return err
	}
	if err := prepareDemoSchema(ctx, pool, q, a.schema, stdout); err != nil {
		return err
	}
	libLog, err := newDemoLog()
	if err != nil {
		return err
	}
	// Said last, after the summary or the error, whichever ends the run.
	defer func() { err = errors.Join(err, libLog.close(stdout)) }()
	client, err := newDemoClient(pool, a.schema, libLog.logger())
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	elapsed, workErr := enqueueAndWatch(ctx, client, pool, q, a, stdout)
	// The jobs are done, or the demo gives up: either way no running job
	// is waited for long.
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := errors.Join(workErr, client.Stop(stopCtx)); err != nil {
		return err
	}
	return printSummary(ctx, pool, q, elapsed, stdout)
}

// demoServer returns the connection string of the server to use and a
// function that releases what demoServer started: with no databaseURL, a
// throwaway server of its own.
func demoServer(ctx context.Context, databaseURL string, stdout io.Writer) (string, func() error, error) {
	if databaseURL != "" {
		return databaseURL, func() error { return nil }, nil
	}
	fmt.Fprintln(stdout, "no --database-url or DATABASE_URL: starting a throwaway PostgreSQL server")
	local, err := pgserver.Start(ctx, pgserver.Options{})
	if err != nil {
		return "", nil, fmt.Errorf("start a throwaway server: %w", err)
	}
	fmt.Fprintf(stdout, "using the throwaway server on 127.0.0.1:%d (data in %s, removed at the end)\n", local.Port(), local.DataDir())
	release := func() error {
		if err := local.Close(); err != nil {
			return fmt.Errorf("stop the throwaway server: %w", err)
		}
		return nil
	}
	return local.ConnString("postgres"), release, nil
}

// prepareDemoSchema migrates the demo's schema and empties its jobs table,
// unless the table holds jobs of other kinds than the demo's: those are not
// the demo's to delete.
func prepareDemoSchema(ctx context.Context, pool *pgxpool.Pool, q *demoQueries, schema string, stdout io.Writer) error {
	res, err := pgqueue.Migrate(ctx, pool, schema)
	if err != nil {
		return err
	}
	printResult(stdout, "migrated", schema, res)
	// Only for the messages: the statements carry the name themselves.
	table := pgx.Identifier{schema, "jobs"}.Sanitize()
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, q.lockJobs); err != nil {
			return fmt.Errorf("empty %s: %w", table, err)
		}
		var foreign bool
		if err := tx.QueryRow(ctx, q.foreignJobs, demoJob{}.Kind()).Scan(&foreign); err != nil {
			return fmt.Errorf("empty %s: %w", table, err)
		}
		if foreign {
			return fmt.Errorf("schema %s holds jobs the demo did not enqueue; refusing to empty it: choose another --schema", schema)
		}
		var left int64
		if err := tx.QueryRow(ctx, q.countLeft).Scan(&left); err != nil {
			return fmt.Errorf("empty %s: %w", table, err)
		}
		if _, err := tx.Exec(ctx, q.emptyJobs); err != nil {
			return fmt.Errorf("empty %s: %w", table, err)
		}
		if left > 0 { // an earlier run was killed: say what goes
			fmt.Fprintf(stdout, "deleting %d jobs left in %s by an earlier demo run that did not finish\n", left, table)
		}
		return nil
	})
}

// demoJob is the args of every demo job.
type demoJob struct {
	// Fail is how many attempts fail before one succeeds; -1: all of them.
	Fail int `json:"fail,omitempty"`
}

func (demoJob) Kind() string { return "demo" }

func workDemoJob(ctx context.Context, job *pgqueue.Job[demoJob]) error {
	select {
	case <-time.After(rand.N(2 * time.Millisecond)):
	case <-ctx.Done():
		return ctx.Err()
	}
	if fail := job.Args.Fail; fail < 0 || job.Attempt <= fail {
		return fmt.Errorf("job %d fails attempt %d, as planned", job.ID, job.Attempt)
	}
	return nil
}

func newDemoClient(pool *pgxpool.Pool, schema string, logger *slog.Logger) (*pgqueue.Client, error) {
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorkerFunc(workers, workDemoJob, nil); err != nil {
		return nil, err
	}
	return pgqueue.New(pool, &pgqueue.Config{
		Schema:  schema,
		Queues:  demoQueues,
		Workers: workers,
		// Short delays, so that retries show up within the demo.
		RetryPolicy:       pgqueue.ExponentialBackoff{Base: 50 * time.Millisecond, Max: 500 * time.Millisecond},
		FetchPollInterval: 100 * time.Millisecond,
		SchedulerInterval: 250 * time.Millisecond,
		Logger:            logger,
	})
}

// demoParams returns n jobs: every tenth fails once or twice, every tenth
// (another one) is scheduled 1-5 s ahead and tagged demoScheduledTag, and
// every hundredth always fails and has 3 attempts. Queue and priority are
// drawn at random.
func demoParams(n int) []pgqueue.EnqueueManyParams {
	queues := make([]string, 0, len(demoQueues))
	for q := range demoQueues {
		queues = append(queues, q)
	}
	now := time.Now()
	params := make([]pgqueue.EnqueueManyParams, n)
	for i := range params {
		var job demoJob
		opts := &pgqueue.EnqueueOpts{
			Queue:    queues[rand.IntN(len(queues))],
			Priority: int16(rand.IntN(4)),
		}
		switch {
		case i%10 == 1:
			job.Fail = 1 + i/10%2
		case i%10 == 2:
			opts.RunAt = now.Add(time.Second + rand.N(4*time.Second))
			opts.Tags = []string{demoScheduledTag}
		case i%100 == 99:
			job.Fail = -1
			opts.MaxAttempts = 3
		}
		params[i] = pgqueue.EnqueueManyParams{Args: job, Opts: opts}
	}
	return params
}

// demoScheduledTag marks the jobs scheduled ahead, for the summary to
// report them apart from the jobs due at once.
const demoScheduledTag = "scheduled-ahead"

// enqueueAndWatch enqueues the demo's jobs and shows their progress until
// none is left to run, or the timeout or an interrupt ends the wait. It
// returns the time from the start of the enqueue to the end of the last
// job.
func enqueueAndWatch(ctx context.Context, client *pgqueue.Client, pool *pgxpool.Pool, q *demoQueries, a demoArgs, stdout io.Writer) (time.Duration, error) {
	wctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	start := time.Now()
	res, err := client.EnqueueMany(wctx, demoParams(a.jobs))
	if err != nil {
		return 0, giveUp(ctx, a.timeout, err)
	}
	fmt.Fprintf(stdout, "enqueued %d jobs in %s\n", res.Enqueued, time.Since(start).Round(time.Millisecond))

	tty := isTerminal(stdout)
	every := time.Second
	if tty {
		every = 100 * time.Millisecond
	}
	// The state is read every 100 ms either way, so that the end is seen
	// at once; it is shown every `every`.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var shown time.Time
	width := 0
	for {
		counts, err := countStates(wctx, pool, q)
		if err != nil {
			if tty {
				fmt.Fprintln(stdout)
			}
			return 0, giveUp(ctx, a.timeout, err)
		}
		now := time.Now()
		done := counts[pgqueue.StateScheduled]+counts[pgqueue.StateAvailable]+counts[pgqueue.StateRunning] == 0
		if done || now.Sub(shown) >= every {
			shown = now
			line := progressLine(counts, now.Sub(start))
			if tty {
				// Blanks over the rest of a longer previous line.
				fmt.Fprint(stdout, "\r"+line+strings.Repeat(" ", max(0, width-len(line))))
				width = len(line)
			} else {
				fmt.Fprintln(stdout, line)
			}
		}
		if done {
			if tty {
				fmt.Fprintln(stdout)
			}
			return now.Sub(start), nil
		}
		select {
		case <-wctx.Done():
		case <-tick.C:
		}
	}
}

// giveUp says why the wait ended early: an interrupt, the timeout, or err.
func giveUp(ctx context.Context, timeout time.Duration, err error) error {
	switch {
	case ctx.Err() != nil:
		return errors.New("interrupted before the jobs were done")
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("timed out: the jobs were not done after %s", timeout)
	default:
		return err
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func countStates(ctx context.Context, pool *pgxpool.Pool, q *demoQueries) (map[pgqueue.JobState]int64, error) {
	rows, _ := pool.Query(ctx, q.countStates)
	counts := map[pgqueue.JobState]int64{}
	var (
		state string
		n     int64
	)
	_, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error {
		counts[pgqueue.JobState(state)] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count jobs by state: %w", err)
	}
	return counts, nil
}

func progressLine(counts map[pgqueue.JobState]int64, elapsed time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%6.1fs", elapsed.Seconds())
	for _, s := range []pgqueue.JobState{pgqueue.StateScheduled, pgqueue.StateAvailable, pgqueue.StateRunning, pgqueue.StateCompleted, pgqueue.StateDiscarded, pgqueue.StateCancelled} {
		if s == pgqueue.StateCancelled && counts[s] == 0 {
			continue // the demo cancels nothing
		}
		fmt.Fprintf(&b, "  %s %5d", s, counts[s])
	}
	// No rate here: once the jobs due at once are done, the scheduled
	// ones would drag it down; the summary gives it.
	return b.String()
}

// printSummary reports the run as the database recorded it. The
// throughput is over the jobs due at once, from the enqueue to the last of
// them finished: the scheduled ones wait on their time, not on the workers.
func printSummary(ctx context.Context, pool *pgxpool.Pool, q *demoQueries, elapsed time.Duration, stdout io.Writer) error {
	var (
		completed, retried, discarded, attempts int64
		due, ahead                              int64
		dueSecs, aheadSecs                      float64
	)
	err := pool.QueryRow(ctx, q.summary, demoScheduledTag).Scan(&completed, &retried, &discarded, &attempts,
		&due, &dueSecs, &ahead, &aheadSecs)
	if err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	fmt.Fprintf(stdout, `summary:
  completed  %d
  retried    %d (completed after failed attempts)
  discarded  %d
  attempts   %d
  elapsed    %s
`, completed, retried, discarded, attempts, elapsed.Round(time.Millisecond))
	if due > 0 && dueSecs > 0 {
		fmt.Fprintf(stdout, "  due at once: %d jobs, finished %.2fs after the enqueue: %.0f jobs/s\n", due, dueSecs, float64(due)/dueSecs)
	}
	if ahead > 0 {
		fmt.Fprintf(stdout, "  scheduled 1-5 s ahead: %d jobs, the last finished %.2fs after the enqueue\n", ahead, aheadSecs)
	}
	return nil
}
