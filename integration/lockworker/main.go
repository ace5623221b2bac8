// Command lockworker is the worker process of pgqueue's lock tests
// (integration/singleton_test.go, integration/leader_test.go). It runs in
// one of three modes:
//
//   - xact, session: works "span" jobs, which are singleton jobs run in
//     pgqueue.SingletonXact or pgqueue.SingletonSession mode. Each run
//     records when it ran, [started, ended] by the database clock, in
//     spans(job_id, key, worker, lock_fence, started, ended), and completes
//     the job in the same transaction. In xact mode the row is written in
//     job.Tx; in session mode in a transaction of its own, fenced with
//     CheckFenceTx(SingletonResource(key), job.LockFence). Writes the
//     database refuses are recorded in refusals(job_id, key, worker,
//     lock_fence, reason, error).
//   - leader: campaigns for the lease "leader" with pgqueue.Elector and,
//     while leading, appends acts(term, holder, lease_fence, at) every
//     -act interval, each fenced with CheckFenceTx(ctx, tx, "leader", term)
//     and carrying the lease's fence as its transaction saw it just before
//     the check. A refused act is recorded in refused_acts(term, holder,
//     error) and ends the term: the elector then resigns it.
//
// Handlers and acts ignore their context's cancellation in their own writes
// (as code that misses a lost lock would): only the locks and the fences
// keep their effects apart.
//
// It prints "ready" once working, one line per leadership event in leader
// mode ("lead term=N", "end term=N cause=..."), and stops gracefully on
// SIGTERM or SIGINT. All its sessions, the session locks' too, carry
// application_name lockworker-<name>; that is also its client ID and its
// holder name.
//
// Usage:
//
//	lockworker -db postgres://... -name 1 -mode xact|session|leader [flags]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// SpanArgs are the args of a "span" job; the job's singleton key is Key.
type SpanArgs struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

// Kind implements pgqueue.JobArgs.
func (SpanArgs) Kind() string { return "span" }

// LeaderLease is the lease leader mode campaigns for, and the fence
// resource of its acts.
const LeaderLease = "leader"

type options struct {
	db         string
	name       string
	mode       string
	lease      time.Duration
	workers    int
	workMin    time.Duration
	workMax    time.Duration
	retryDelay time.Duration
	ttl        time.Duration
	renew      time.Duration
	retry      time.Duration
	margin     time.Duration
	act        time.Duration
	idleTx     time.Duration
	verbose    bool
}

func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("lockworker", flag.ContinueOnError)
	o := &options{}
	fs.StringVar(&o.db, "db", os.Getenv("DATABASE_URL"), "database URL (default $DATABASE_URL)")
	fs.StringVar(&o.name, "name", "", "worker name; its sessions' application_name is lockworker-<name> (required)")
	fs.StringVar(&o.mode, "mode", "", "xact, session or leader (required)")
	fs.DurationVar(&o.lease, "lease", 2*time.Second, "job lease; also the maintenance leader's TTL")
	fs.IntVar(&o.workers, "workers", 4, "jobs run at once")
	fs.DurationVar(&o.workMin, "work-min", 10*time.Millisecond, "least time a span lasts")
	fs.DurationVar(&o.workMax, "work-max", 40*time.Millisecond, "most time a span lasts")
	fs.DurationVar(&o.retryDelay, "retry-delay", 100*time.Millisecond, "wait of a job whose key is busy")
	fs.DurationVar(&o.ttl, "ttl", 2*time.Second, "leader mode: the leader's lease")
	fs.DurationVar(&o.renew, "renew", 500*time.Millisecond, "leader mode: renew interval")
	fs.DurationVar(&o.retry, "retry", 200*time.Millisecond, "leader mode: how often a follower tries")
	fs.DurationVar(&o.margin, "margin", 500*time.Millisecond, "leader mode: safety margin")
	fs.DurationVar(&o.act, "act", 50*time.Millisecond, "leader mode: interval between acts")
	fs.DurationVar(&o.idleTx, "idle-tx-timeout", time.Second, "leader mode: idle_in_transaction_session_timeout of the sessions")
	fs.BoolVar(&o.verbose, "v", false, "log at debug level")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case o.db == "":
		return nil, errors.New("-db or DATABASE_URL is required")
	case o.name == "":
		return nil, errors.New("-name is required")
	case o.mode != "xact" && o.mode != "session" && o.mode != "leader":
		return nil, fmt.Errorf("-mode %q: want xact, session or leader", o.mode)
	case o.workers < 1:
		return nil, errors.New("-workers must be at least 1")
	case o.workMin < 0 || o.workMax < o.workMin:
		return nil, errors.New("need 0 <= -work-min <= -work-max")
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockworker:", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "lockworker %s: %v\n", o.name, err)
		os.Exit(1)
	}
}

// out serialises stdout lines, which the tests parse.
var out sync.Mutex

func say(format string, args ...any) {
	out.Lock()
	defer out.Unlock()
	fmt.Printf(format+"\n", args...)
}

func run(o *options) error {
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelDebug
	}
	id := "lockworker-" + o.name
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("worker", id)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	cfg, err := pgxpool.ParseConfig(o.db)
	if err != nil {
		return fmt.Errorf("parse -db: %w", err)
	}
	// Session locks dial with this configuration too, so their sessions
	// carry the name as well.
	cfg.ConnConfig.RuntimeParams["application_name"] = id
	cfg.ConnConfig.ConnectTimeout = 3 * time.Second
	if o.mode == "leader" {
		// An act's transaction holds the fence row's lock from its check
		// to its commit: a leader paused in between would hold up its
		// successor's acts for as long as the pause. The server ends such
		// a session once it idles in its transaction for this long.
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(o.idleTx.Milliseconds())
	}
	cfg.MaxConns = int32(o.workers + 4)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("open pool: %w", err)
	}
	defer pool.Close()

	if o.mode == "leader" {
		return lead(ctx, stop, o, id, pool, logger)
	}

	mode := pgqueue.SingletonXact
	if o.mode == "session" {
		mode = pgqueue.SingletonSession
	}
	w := &spanWorker{opts: o, id: id, pool: pool, log: logger}
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorker[SpanArgs](workers, w, &pgqueue.WorkerOpts{SingletonMode: mode}); err != nil {
		return err
	}
	client, err := pgqueue.New(pool, &pgqueue.Config{
		ID:                  id,
		Queues:              map[string]pgqueue.QueueConfig{pgqueue.DefaultQueue: {MaxWorkers: o.workers}},
		Workers:             workers,
		JobLease:               o.lease,
		LeaderTTL:           o.lease,
		RescueInterval:      o.lease / 4,
		FetchPollInterval:   50 * time.Millisecond,
		SchedulerInterval:   50 * time.Millisecond,
		SingletonRetryDelay: o.retryDelay,
		JobTimeout:          10 * time.Second,
		// Faults must never use up a job's attempts.
		RetryPolicy: pgqueue.ExponentialBackoff{Base: 50 * time.Millisecond, Max: 500 * time.Millisecond},
		Logger:      logger,
	})
	if err != nil {
		return err
	}
	w.client = client
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	say("ready")
	<-ctx.Done()
	stop() // a second signal kills the process the default way
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	say("stopped")
	return nil
}

// spanWorker works "span" jobs.
type spanWorker struct {
	opts   *options
	id     string
	pool   *pgxpool.Pool
	client *pgqueue.Client
	log    *slog.Logger
}

// Work records the job's span under its key's lock and completes the job in
// the same transaction.
func (w *spanWorker) Work(ctx context.Context, job *pgqueue.Job[SpanArgs]) error {
	// Deaf to a lost lock or lease, but not stuck forever on a dead
	// network.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	var err error
	var reason string
	if w.opts.mode == "xact" {
		reason, err = w.xact(wctx, job)
	} else {
		reason, err = w.session(wctx, job)
	}
	if err != nil {
		w.refuse(job, reason, err)
	}
	return err
}

func (w *spanWorker) xact(ctx context.Context, job *pgqueue.Job[SpanArgs]) (string, error) {
	if job.Tx == nil {
		return "setup", errors.New("no job.Tx in xact mode")
	}
	var start time.Time
	if err := job.Tx.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&start); err != nil {
		return "error", fmt.Errorf("start: %w", err)
	}
	time.Sleep(w.workTime())
	if err := w.insert(ctx, job.Tx, job, start); err != nil {
		return "error", err
	}
	// pgqueue completes the job in job.Tx and commits it.
	return "", nil
}

func (w *spanWorker) session(ctx context.Context, job *pgqueue.Job[SpanArgs]) (string, error) {
	var start time.Time
	if err := w.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&start); err != nil {
		return "error", fmt.Errorf("start: %w", err)
	}
	time.Sleep(w.workTime())
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return "error", fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := w.client.CheckFenceTx(ctx, tx, pgqueue.SingletonResource(job.Args.Key), job.LockFence); err != nil {
		if pgqueue.IsStaleFence(err) {
			return "stale-fence", err
		}
		return "error", err
	}
	if err := w.insert(ctx, tx, job, start); err != nil {
		return "error", err
	}
	if err := w.client.CompleteTx(ctx, tx, job.JobRow); err != nil {
		if errors.Is(err, pgqueue.ErrJobLeaseLost) {
			return "lease-lost", err
		}
		return "error", err
	}
	if err := tx.Commit(ctx); err != nil {
		return "commit", fmt.Errorf("commit: %w", err)
	}
	return "", nil
}

func (w *spanWorker) insert(ctx context.Context, tx pgx.Tx, job *pgqueue.Job[SpanArgs], start time.Time) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO spans (job_id, key, worker, lock_fence, started, ended)
		VALUES ($1, $2, $3, $4, $5, clock_timestamp())`,
		job.ID, job.Args.Key, w.id, job.LockFence, start)
	if err != nil {
		return fmt.Errorf("insert span: %w", err)
	}
	return nil
}

// refuse records a failed run, as well as the database lets it: the tests
// only report these rows.
func (w *spanWorker) refuse(job *pgqueue.Job[SpanArgs], reason string, cause error) {
	w.log.Debug("span refused", "job", job.ID, "key", job.Args.Key, "reason", reason, "err", cause)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = w.pool.Exec(ctx, `
		INSERT INTO refusals (job_id, key, worker, lock_fence, reason, error) VALUES ($1, $2, $3, $4, $5, $6)`,
		job.ID, job.Args.Key, w.id, job.LockFence, reason, cause.Error())
}

func (w *spanWorker) workTime() time.Duration {
	spread := w.opts.workMax - w.opts.workMin
	if spread <= 0 {
		return w.opts.workMin
	}
	return w.opts.workMin + rand.N(spread+1)
}

// lead runs leader mode until ctx ends.
func lead(ctx context.Context, stop context.CancelFunc, o *options, id string, pool *pgxpool.Pool, logger *slog.Logger) error {
	client, err := pgqueue.New(pool, &pgqueue.Config{ID: id, Logger: logger})
	if err != nil {
		return err
	}
	elector, err := client.NewElector(LeaderLease, &pgqueue.ElectorConfig{
		Holder:        id,
		TTL:           o.ttl,
		RenewInterval: o.renew,
		RetryInterval: o.retry,
		SafetyMargin:  o.margin,
	})
	if err != nil {
		return err
	}
	say("ready")
	elector.Run(ctx, func(ctx context.Context, term int64) {
		say("lead term=%d", term)
		cause := actWhileLeading(ctx, client, pool, id, o.act, term)
		say("end term=%d cause=%v", term, cause)
	})
	stop()
	say("stopped")
	return nil
}

// actWhileLeading acts at once, then every interval, until ctx ends or an
// act is refused as stale; it returns why it stopped.
func actWhileLeading(ctx context.Context, client *pgqueue.Client, pool *pgxpool.Pool, id string, interval time.Duration, term int64) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		err := act(ctx, client, pool, id, term)
		if pgqueue.IsStaleFence(err) {
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = pool.Exec(rctx, `INSERT INTO refused_acts (term, holder, error) VALUES ($1, $2, $3)`, term, id, err.Error())
			cancel()
			say("refused term=%d", term)
			// Step down: returning makes the elector resign the term.
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
	}
}

// act appends one act in a transaction fenced with the term.
func act(ctx context.Context, client *pgqueue.Client, pool *pgxpool.Pool, id string, term int64) error {
	// Deaf to the end of the term once started, like a slow leader: only
	// the fence stops a stale act.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// The lease's fence as it stands just before the check: the tests
	// compare it with the term.
	var leaseFence int64
	if err := tx.QueryRow(ctx, `SELECT fence FROM pgqueue.leases WHERE name = $1`, LeaderLease).Scan(&leaseFence); err != nil {
		return err
	}
	if err := client.CheckFenceTx(ctx, tx, LeaderLease, term); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO acts (term, holder, lease_fence, at) VALUES ($1, $2, $3, clock_timestamp())`,
		term, id, leaseFence); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
