// Command faultworker is the worker process of pgqueue's fault tests. It
// works jobs of kind "effect" on queue "default": each job writes one row
// to effects(job_id, fence, worker) under the job's fence token and
// completes the job in the same transaction. Every write it attempts that
// the database refuses (or whose outcome it cannot know) is recorded in
// refusals(job_id, fence, worker, reason, error).
//
// It prints "ready" once working and stops gracefully on SIGTERM or SIGINT.
// Its connections carry application_name faultworker-<name>, and its client
// ID (the jobs' worker_id) is <name>.
//
// Usage:
//
//	faultworker -db postgres://... -name w1 [-lease 2s] [-max-workers 8] ...
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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// Reasons recorded in refusals.
const (
	// reasonStaleFence: CheckFenceTx found a higher token for the job.
	reasonStaleFence = "stale-fence"
	// reasonLeaseLost: CompleteTx found the job taken over, or the handler's
	// context ended because the lease was lost.
	reasonLeaseLost = "lease-lost"
	// reasonCommit: the commit failed; whether it took effect is unknown.
	reasonCommit = "commit-unknown"
	// reasonError: any other failure before the commit (connection lost,
	// server gone): nothing was written.
	reasonError = "error"
)

// Where a handler waits inside its transaction (-sleep-at).
const (
	sleepAfterCheck    = "after-check"
	sleepAfterComplete = "after-complete"
)

// EffectArgs are the args of an "effect" job.
type EffectArgs struct {
	N int `json:"n"`
}

// Kind implements pgqueue.JobArgs.
func (EffectArgs) Kind() string { return "effect" }

type options struct {
	db             string
	schema         string
	name           string
	lease          time.Duration
	heartbeat      time.Duration
	rescue         time.Duration
	leaderTTL      time.Duration
	poll           time.Duration
	maxWorkers     int
	sleepMin       time.Duration
	sleepMax       time.Duration
	sleepAt        string
	zombie         bool
	verbose        bool
	idleTxTimeout  time.Duration
	stopTimeout    time.Duration
	connectTimeout time.Duration
}

func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("faultworker", flag.ContinueOnError)
	o := &options{}
	fs.StringVar(&o.db, "db", os.Getenv("DATABASE_URL"), "database URL (default $DATABASE_URL)")
	fs.StringVar(&o.schema, "schema", pgqueue.DefaultSchema, "pgqueue schema")
	fs.StringVar(&o.name, "name", "", "worker name: client ID and application_name suffix (required)")
	fs.DurationVar(&o.lease, "lease", 2*time.Second, "claim lease")
	fs.DurationVar(&o.heartbeat, "heartbeat", 0, "heartbeat interval (0: lease/3)")
	fs.DurationVar(&o.rescue, "rescue", 500*time.Millisecond, "rescue interval")
	fs.DurationVar(&o.leaderTTL, "leader-ttl", 2*time.Second, "maintenance leader's lease: how soon another worker rescues and schedules when the leader dies or hangs")
	fs.DurationVar(&o.poll, "poll", 200*time.Millisecond, "fetch poll interval")
	fs.IntVar(&o.maxWorkers, "max-workers", 8, "jobs run at once")
	fs.DurationVar(&o.sleepMin, "sleep-min", 5*time.Millisecond, "least time a handler waits inside its transaction")
	fs.DurationVar(&o.sleepMax, "sleep-max", 30*time.Millisecond, "most time a handler waits inside its transaction")
	fs.StringVar(&o.sleepAt, "sleep-at", sleepAfterCheck, "where the handler waits: after-check (between CheckFenceTx and CompleteTx) or after-complete (between CompleteTx and COMMIT)")
	fs.BoolVar(&o.zombie, "zombie", true, "handlers ignore their context's cancellation in their own writes, as a handler that misses a lost lease would: only fencing keeps their writes out")
	fs.DurationVar(&o.idleTxTimeout, "idle-tx-timeout", 0, "idle_in_transaction_session_timeout of the worker's sessions (0: server default)")
	fs.DurationVar(&o.stopTimeout, "stop-timeout", 10*time.Second, "how long a graceful stop may take")
	fs.DurationVar(&o.connectTimeout, "connect-timeout", 3*time.Second, "connect timeout of the worker's connections")
	fs.BoolVar(&o.verbose, "v", false, "log at debug level")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case o.db == "":
		return nil, errors.New("-db or DATABASE_URL is required")
	case o.name == "":
		return nil, errors.New("-name is required")
	case o.maxWorkers < 1:
		return nil, errors.New("-max-workers must be at least 1")
	case o.sleepMin < 0 || o.sleepMax < o.sleepMin:
		return nil, errors.New("need 0 <= -sleep-min <= -sleep-max")
	case o.sleepAt != sleepAfterCheck && o.sleepAt != sleepAfterComplete:
		return nil, fmt.Errorf("-sleep-at must be %s or %s", sleepAfterCheck, sleepAfterComplete)
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultworker:", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "faultworker %s: %v\n", o.name, err)
		os.Exit(1)
	}
}

func run(o *options) error {
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("worker", o.name)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	cfg, err := pgxpool.ParseConfig(o.db)
	if err != nil {
		return fmt.Errorf("parse -db: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "faultworker-" + o.name
	if o.idleTxTimeout > 0 {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(o.idleTxTimeout.Milliseconds())
	}
	cfg.ConnConfig.ConnectTimeout = o.connectTimeout
	// Every handler holds a connection for its transaction; the client
	// needs a few more for claims, heartbeats and results, and a starved
	// heartbeat would lose leases for no fault of the network.
	cfg.MaxConns = int32(o.maxWorkers + 4)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("open pool: %w", err)
	}
	defer pool.Close()

	w := &effectWorker{opts: o, pool: pool, log: logger}
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorker[EffectArgs](workers, w, nil); err != nil {
		return err
	}
	client, err := pgqueue.New(pool, &pgqueue.Config{
		Schema:            o.schema,
		ID:                o.name,
		Queues:            map[string]pgqueue.QueueConfig{pgqueue.DefaultQueue: {MaxWorkers: o.maxWorkers}},
		Workers:           workers,
		JobLease:             o.lease,
		HeartbeatInterval: o.heartbeat,
		RescueInterval:    o.rescue,
		LeaderTTL:         o.leaderTTL,
		FetchPollInterval: o.poll,
		SchedulerInterval: o.poll,
		// Faults must never use up a job's attempts: retry soon and often.
		RetryPolicy: pgqueue.ExponentialBackoff{Base: 100 * time.Millisecond, Max: time.Second},
		Logger:      logger,
	})
	if err != nil {
		return err
	}
	w.client = client
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	fmt.Println("ready")

	<-ctx.Done()
	stop() // a second signal kills the process the default way
	stopCtx, cancel := context.WithTimeout(context.Background(), o.stopTimeout)
	defer cancel()
	err = client.Stop(stopCtx)
	fmt.Printf("stopped: effects=%d refusals=%d\n", w.effects.Load(), w.refusals.Load())
	if err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	return nil
}

// effectWorker works "effect" jobs.
type effectWorker struct {
	opts   *options
	pool   *pgxpool.Pool
	client *pgqueue.Client
	log    *slog.Logger

	effects, refusals atomic.Int64
}

// Work writes the job's effect and completes the job in one transaction,
// both fenced by the job's token.
func (w *effectWorker) Work(ctx context.Context, job *pgqueue.Job[EffectArgs]) error {
	wctx := ctx
	if w.opts.zombie {
		// Deaf to a lost lease, but not stuck forever on a dead network.
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
	}
	reason, err := w.apply(wctx, job)
	if err == nil {
		w.effects.Add(1)
		return nil
	}
	if reason == reasonError && !w.opts.zombie && errors.Is(context.Cause(ctx), pgqueue.ErrJobLeaseLost) {
		// The client saw the lease go and stopped the write itself.
		reason = reasonLeaseLost
	}
	w.refuse(ctx, job, reason, err)
	return err
}

// apply runs the job's transaction and, when it fails, says why in a
// refusals reason.
func (w *effectWorker) apply(ctx context.Context, job *pgqueue.Job[EffectArgs]) (string, error) {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return reasonError, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	if _, err := tx.Exec(ctx, `INSERT INTO effects (job_id, fence, worker) VALUES ($1, $2, $3)`,
		job.ID, job.Fence, w.opts.name); err != nil {
		return reasonError, fmt.Errorf("insert effect: %w", err)
	}
	if err := w.client.CheckFenceTx(ctx, tx, fmt.Sprintf("job:%d", job.ID), job.Fence); err != nil {
		if pgqueue.IsStaleFence(err) {
			return reasonStaleFence, err
		}
		return reasonError, err
	}
	// Widen the window in which a takeover can overtake this holder.
	if w.opts.sleepAt == sleepAfterCheck {
		if err := sleep(ctx, w.sleepTime()); err != nil {
			return reasonError, err
		}
	}
	if err := w.client.CompleteTx(ctx, tx, job.JobRow); err != nil {
		if errors.Is(err, pgqueue.ErrJobLeaseLost) {
			return reasonLeaseLost, err
		}
		return reasonError, err
	}
	if w.opts.sleepAt == sleepAfterComplete {
		// Hold the job's row lock, as a holder about to commit does.
		if err := sleep(ctx, w.sleepTime()); err != nil {
			return reasonError, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return reasonCommit, fmt.Errorf("commit: %w", err)
	}
	return "", nil
}

// refuse records a failed write in autocommit, as well as the database
// lets it: the tests only report these rows.
func (w *effectWorker) refuse(ctx context.Context, job *pgqueue.Job[EffectArgs], reason string, cause error) {
	w.refusals.Add(1)
	w.log.Debug("write refused", "job", job.ID, "fence", job.Fence, "reason", reason, "err", cause)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := w.pool.Exec(ctx, `INSERT INTO refusals (job_id, fence, worker, reason, error) VALUES ($1, $2, $3, $4, $5)`,
		job.ID, job.Fence, w.opts.name, reason, cause.Error())
	if err != nil {
		w.log.Debug("recording refusal failed", "job", job.ID, "err", err)
	}
}

func (w *effectWorker) sleepTime() time.Duration {
	spread := w.opts.sleepMax - w.opts.sleepMin
	if spread <= 0 {
		return w.opts.sleepMin
	}
	return w.opts.sleepMin + rand.N(spread+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
