// Command lockworker is the worker process of pgqueue's lock tests
// (integration/singleton_test.go, integration/leader_test.go). It runs in
// one of four modes:
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
//   - leader: campaigns for the lease "leader" with a pglock.Elector and,
//     while leading, appends acts(term, holder, lease_fence, at) every
//     -act interval, each fenced with CheckFenceTx(ctx, tx, "leader", term)
//     and carrying the lease's fence as its transaction saw it just before
//     the check. A refused act is recorded in refused_acts(term, holder,
//     error) and ends the term: the elector then resigns it.
//   - lease: holds the lease "leader" with a bare pglock.LeaseLock and
//     renews it every -renew interval without looking at ValidUntil, as a
//     careless holder might, printing "hold term=N", "renewed term=N" and,
//     once a renewal is refused, "lost term=N"; then it campaigns again.
//     With -session-failover the elector holds the leadership also as a
//     session advisory lock (pglock.ElectorConfig.SessionFailover), tried
//     by followers every -session-interval.
//     The database alone must refuse a stale renewal (the elector of
//     leader mode never sends one once its own clock says the lease ended).
//
// Handlers and acts ignore their context's cancellation in their own writes
// (as code that misses a lost lock would): only the locks and the fences
// keep their effects apart.
//
// It prints "ready" once working, one line per leadership event in leader
// mode ("lead term=N", "end term=N cause=...", "refused term=N"), and stops
// gracefully on SIGTERM or SIGINT, then prints "stopped". All its sessions,
// the session locks' too, carry application_name lockworker-<name>; that is
// also its client ID and its holder name. The flags it shares with
// faultworker, and its exit codes, are workerproc's.
//
// Usage:
//
//	lockworker -db postgres://... -name 1 -mode xact|session|leader|lease [flags]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/integration/internal/workerproc"
	"github.com/pgqueue/pgqueue/pglock"
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

// options are lockworker's own flags.
type options struct {
	mode       string
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
	session    bool
	sessionInt time.Duration
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.mode, "mode", "", "xact, session or leader (required)")
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
	fs.BoolVar(&o.session, "session-failover", false, "leader mode: hold the leadership also as a session lock, so a follower takes over as soon as the leader's session ends")
	fs.DurationVar(&o.sessionInt, "session-interval", 0, "leader mode: how often followers try the session lock (0: the elector's default, TTL/20)")
}

func (o *options) check() error {
	switch {
	case o.mode != "xact" && o.mode != "session" && o.mode != "leader" && o.mode != "lease":
		return fmt.Errorf("-mode %q: want xact, session, leader or lease", o.mode)
	case o.workers < 1:
		return errors.New("-workers must be at least 1")
	case o.workMin < 0 || o.workMax < o.workMin:
		return errors.New("need 0 <= -work-min <= -work-max")
	}
	return nil
}

// pool sizes the pool and, in leader mode, bounds idle transactions.
func (o *options) pool(cfg *pgxpool.Config) {
	if o.mode == "leader" {
		// An act's transaction holds the fence row's lock from its check
		// to its commit: a leader paused in between would hold up its
		// successor's acts for as long as the pause. The server ends such
		// a session once it idles in its transaction for this long.
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(o.idleTx.Milliseconds())
	}
	cfg.MaxConns = int32(o.workers + 4)
}

func main() {
	o := &options{}
	workerproc.Main(workerproc.Spec{
		Command:    "lockworker",
		LogLevel:   slog.LevelWarn,
		LeaseUsage: "job lease; also the maintenance leader's TTL",
		Flags:      o.register,
		Check:      o.check,
		Pool:       o.pool,
		Run:        o.run,
	})
}

// run runs the mode until ctx ends.
func (o *options) run(ctx context.Context, p *workerproc.Worker) error {
	if o.mode == "leader" {
		return o.lead(ctx, p)
	}
	if o.mode == "lease" {
		return o.holdLease(ctx, p)
	}
	mode := pgqueue.SingletonXact
	if o.mode == "session" {
		mode = pgqueue.SingletonSession
	}
	w := &spanWorker{opts: o, id: p.AppName, pool: p.Pool, log: p.Log}
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorker[SpanArgs](workers, w, &pgqueue.WorkerOpts{SingletonMode: mode}); err != nil {
		return err
	}
	client, err := pgqueue.New(p.Pool, &pgqueue.Config{
		Schema:              p.Schema,
		ID:                  p.AppName,
		Queues:              map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: o.workers}},
		Workers:             workers,
		JobLease:            p.Lease,
		LeaderTTL:           p.Lease,
		RescueInterval:      p.Lease / 4,
		FetchPollInterval:   50 * time.Millisecond,
		SchedulerInterval:   50 * time.Millisecond,
		SingletonRetryDelay: o.retryDelay,
		JobTimeout:          10 * time.Second,
		// Faults must never use up a job's attempts.
		RetryPolicy: pgqueue.ExponentialBackoff{Base: 50 * time.Millisecond, Max: 500 * time.Millisecond},
		Logger:      p.Log,
	})
	if err != nil {
		return err
	}
	w.client = client
	if err := p.Serve(ctx, client); err != nil {
		return err
	}
	p.Say("stopped")
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
		reason, err = w.session(wctx, ctx, job)
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

// session runs a job in session mode. It records the run in attempts, in
// autocommit, whether or not its writes are later refused: what the
// session lock itself keeps apart, fences aside. jobCtx is the handler's
// context, ended with pglock.ErrLost when the lock's connection died.
func (w *spanWorker) session(ctx, jobCtx context.Context, job *pgqueue.Job[SpanArgs]) (string, error) {
	var start time.Time
	var attempt int64
	if err := w.pool.QueryRow(ctx, `INSERT INTO attempts (job_id, key, worker, lock_fence) VALUES ($1, $2, $3, $4) RETURNING id, started`,
		job.ID, job.Args.Key, w.id, job.LockFence).Scan(&attempt, &start); err != nil {
		return "error", fmt.Errorf("start: %w", err)
	}
	defer func() {
		// Ended before the handler returns, so before the lock is released.
		_, _ = w.pool.Exec(ctx, `UPDATE attempts SET ended = clock_timestamp(), lock_lost = $2 WHERE id = $1`,
			attempt, errors.Is(context.Cause(jobCtx), pglock.ErrLost))
	}()
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
func (o *options) lead(ctx context.Context, p *workerproc.Worker) error {
	// The client only checks the acts' fences.
	client, err := pgqueue.New(p.Pool, &pgqueue.Config{Schema: p.Schema, ID: p.AppName, Logger: p.Log})
	if err != nil {
		return err
	}
	locker, err := pglock.New(p.Pool, &pglock.Config{Schema: p.Schema, Logger: p.Log})
	if err != nil {
		return err
	}
	elector, err := locker.NewElector(LeaderLease, &pglock.ElectorConfig{
		Holder:        p.AppName,
		TTL:           o.ttl,
		RenewInterval: o.renew,
		RetryInterval: o.retry,
		SafetyMargin:  o.margin,

		SessionFailover: o.session,
		SessionInterval: o.sessionInt,
	})
	if err != nil {
		return err
	}
	l := &leader{p: p, client: client, leases: pgx.Identifier{p.Schema, "leases"}.Sanitize()}
	p.Ready()
	elector.Run(ctx, func(ctx context.Context, term int64) {
		p.Say("lead term=%d", term)
		cause := l.actWhileLeading(ctx, o.act, term)
		p.Say("end term=%d cause=%v", term, cause)
	})
	p.Say("stopped")
	return nil
}

// holdLease runs lease mode until ctx ends.
func (o *options) holdLease(ctx context.Context, p *workerproc.Worker) error {
	locker, err := pglock.New(p.Pool, &pglock.Config{Schema: p.Schema, Logger: p.Log})
	if err != nil {
		return err
	}
	p.Ready()
	tick := time.NewTicker(o.renew)
	defer tick.Stop()
	var lease *pglock.LeaseLock
	for {
		select {
		case <-ctx.Done():
			if lease != nil {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				_ = lease.Release(rctx)
				cancel()
			}
			p.Say("stopped")
			return nil
		case <-tick.C:
		}
		if lease == nil {
			l, err := locker.TryLockLease(ctx, LeaderLease, p.AppName, o.ttl)
			if err == nil {
				lease = l
				p.Say("hold term=%d", l.Fence())
			}
			continue
		}
		switch err := lease.Renew(ctx); {
		case err == nil:
			p.Say("renewed term=%d", lease.Fence())
		case errors.Is(err, pglock.ErrLost):
			p.Say("lost term=%d", lease.Fence())
			lease = nil
		}
	}
}

// leader acts while its process leads.
type leader struct {
	p      *workerproc.Worker
	client *pgqueue.Client
	leases string // the leases table, quoted
}

// actWhileLeading acts at once, then every interval, until ctx ends or an
// act is refused as stale; it returns why it stopped.
func (l *leader) actWhileLeading(ctx context.Context, interval time.Duration, term int64) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		err := l.act(ctx, term)
		if pgqueue.IsStaleFence(err) {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, _ = l.p.Pool.Exec(rctx, `INSERT INTO refused_acts (term, holder, error) VALUES ($1, $2, $3)`, term, l.p.AppName, err.Error())
			cancel()
			l.p.Say("refused term=%d", term)
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
func (l *leader) act(ctx context.Context, term int64) error {
	// Deaf to the end of the term once started, like a slow leader: only
	// the fence stops a stale act.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	tx, err := l.p.Pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// The lease's fence as it stands just before the check: the tests
	// compare it with the term.
	var leaseFence int64
	if err := tx.QueryRow(ctx, `SELECT fence FROM `+l.leases+` WHERE name = $1`, LeaderLease).Scan(&leaseFence); err != nil {
		return err
	}
	if err := l.client.CheckFenceTx(ctx, tx, LeaderLease, term); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO acts (term, holder, lease_fence, at) VALUES ($1, $2, $3, clock_timestamp())`,
		term, l.p.AppName, leaseFence); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
