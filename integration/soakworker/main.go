// Command soakworker is the worker process of pgqueue's soak run
// (integration/soak_test.go, build tag soak). It works every kind of job
// the run enqueues, on the queues "default" and "soak-p", and carries the
// periodic job "soak-tick" (every second) unless -periodic=false:
//
//   - "soak" and "soak_unique" (plain and unique jobs) and "soak_tick" (the
//     periodic job's runs): the handler first snoozes while the job has
//     fewer than its "snooze" arg rows in snoozes, fails while its attempt
//     is at most its "fail" arg, waits its "slow_ms" arg honouring its
//     context (a JobCancel ends it there: it returns its context's cause),
//     then, in one transaction, inserts its effect row, checks the fence of
//     "job:<id>" with CheckFenceTx (unless its "no_check" arg is set) and
//     completes the job with CompleteTx;
//   - "soak_single_x" and "soak_single_s" (singleton jobs of the arg "key",
//     SingletonXact and SingletonSession): the same transaction (Job.Tx in
//     xact mode; in session mode also fenced with the lock's fence for
//     SingletonResource(key)) also records the run's span, [started, ended]
//     by the database clock, in spans.
//
// Handlers ignore their context's cancellation in their own writes (a lost
// lease does not stop them): only fencing keeps a stale holder's writes
// out. Every write the database refuses, or whose outcome is unknown, is
// recorded in refusals with the fault suite's reasons.
//
// On SIGUSR1 it removes the periodic job (the run drains) and prints
// "periodic removed". It prints "ready" once working and stops gracefully on
// SIGTERM or SIGINT, then prints "stopped: effects=N refusals=N". Its
// sessions carry application_name soakworker-<name>; its client ID (the
// jobs' worker_id) is <name>. The flags it shares with the other worker
// commands, and its exit codes, are workerproc's; -lease is the job lease.
//
// Usage:
//
//	soakworker -db postgres://... -name w1 [-lease 2s] [-max-workers 3]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/integration/internal/workerproc"
)

// Reasons recorded in refusals: the fault suite's (see faultworker).
const (
	reasonStaleFence = "stale-fence"
	reasonLeaseLost  = "lease-lost"
	reasonCommit     = "commit-unknown"
	reasonError      = "error"
)

// PeriodicName is the name of the periodic job every soakworker carries.
const PeriodicName = "soak-tick"

// PausedQueue is the queue the run pauses and resumes.
const PausedQueue = "soak-p"

// Args are the args of every kind the soak run enqueues.
type Args struct {
	// Batch is the driver's batch the job was enqueued in (0: a periodic
	// run); N its number in the run.
	Batch int64 `json:"batch,omitempty"`
	N     int64 `json:"n,omitempty"`
	// Fail is how many attempts fail on purpose before one succeeds.
	Fail int `json:"fail,omitempty"`
	// Snooze is how many times the job snoozes before it runs.
	Snooze int `json:"snooze,omitempty"`
	// SlowMS is how long the handler waits, honouring its context, before
	// it writes: a window for JobCancel of a running job.
	SlowMS int `json:"slow_ms,omitempty"`
	// NoCheck skips CheckFenceTx: CompleteTx's own fence is then all that
	// keeps a stale holder's effect out.
	NoCheck bool `json:"no_check,omitempty"`
	// Key is the singleton key (singleton kinds) or the unique key (unique
	// kind), as given in EnqueueOpts.
	Key string `json:"key,omitempty"`
}

// EffectArgs are plain jobs.
type EffectArgs struct{ Args }

// Kind implements pgqueue.JobArgs.
func (EffectArgs) Kind() string { return "soak" }

// UniqueArgs are unique jobs (EnqueueOpts.Unique by Key).
type UniqueArgs struct{ Args }

// Kind implements pgqueue.JobArgs.
func (UniqueArgs) Kind() string { return "soak_unique" }

// TickArgs are the periodic job's runs.
type TickArgs struct{ Args }

// Kind implements pgqueue.JobArgs.
func (TickArgs) Kind() string { return "soak_tick" }

// XactArgs are singleton jobs run in SingletonXact mode.
type XactArgs struct{ Args }

// Kind implements pgqueue.JobArgs.
func (XactArgs) Kind() string { return "soak_single_x" }

// SessionArgs are singleton jobs run in SingletonSession mode.
type SessionArgs struct{ Args }

// Kind implements pgqueue.JobArgs.
func (SessionArgs) Kind() string { return "soak_single_s" }

// soakArgs is what every args type gives the handlers.
type soakArgs interface {
	pgqueue.JobArgs
	args() Args
}

func (a Args) args() Args { return a }

// options are soakworker's own flags.
type options struct {
	maxWorkers int
	pausedMax  int
	sleepMin   time.Duration
	sleepMax   time.Duration
	idleTx     time.Duration
	retention  time.Duration
	prune      time.Duration
	periodic   bool
}

func (o *options) register(fs *flag.FlagSet) {
	fs.IntVar(&o.maxWorkers, "max-workers", 3, "jobs of the default queue run at once")
	fs.IntVar(&o.pausedMax, "paused-max-workers", 2, "jobs of the queue "+PausedQueue+" run at once")
	fs.DurationVar(&o.sleepMin, "sleep-min", 5*time.Millisecond, "least time a handler waits inside its transaction")
	fs.DurationVar(&o.sleepMax, "sleep-max", 30*time.Millisecond, "most time a handler waits inside its transaction")
	fs.DurationVar(&o.idleTx, "idle-tx-timeout", 2*time.Second, "idle_in_transaction_session_timeout of the sessions (0: server default)")
	fs.DurationVar(&o.retention, "retention", 20*time.Second, "retention of completed, cancelled and discarded jobs")
	fs.DurationVar(&o.prune, "prune-interval", 3*time.Second, "Config.PruneInterval")
	fs.BoolVar(&o.periodic, "periodic", true, "carry the periodic job "+PeriodicName)
}

func (o *options) check() error {
	switch {
	case o.maxWorkers < 1 || o.pausedMax < 1:
		return errors.New("-max-workers and -paused-max-workers must be at least 1")
	case o.sleepMin < 0 || o.sleepMax < o.sleepMin:
		return errors.New("need 0 <= -sleep-min <= -sleep-max")
	case o.retention <= 0 || o.prune <= 0:
		return errors.New("-retention and -prune-interval must be positive")
	}
	return nil
}

// pool sizes the pool and bounds idle transactions: a holder frozen inside
// its transaction keeps a fence row locked only that long.
func (o *options) pool(cfg *pgxpool.Config) {
	if o.idleTx > 0 {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(o.idleTx.Milliseconds())
	}
	// One connection per handler's transaction, a few for the client.
	cfg.MaxConns = int32(o.maxWorkers + o.pausedMax + 5)
}

func main() {
	o := &options{}
	workerproc.Main(workerproc.Spec{
		Command:    "soakworker",
		LeaseUsage: "job lease; also the maintenance leader's TTL",
		Flags:      o.register,
		Check:      o.check,
		Pool:       o.pool,
		Run:        o.run,
	})
}

// run works until ctx ends, then stops gracefully.
func (o *options) run(ctx context.Context, p *workerproc.Worker) error {
	w := &soakWorker{opts: o, name: p.Name, pool: p.Pool}
	workers := pgqueue.NewWorkers()
	errs := []error{
		pgqueue.AddWorkerFunc(workers, work[EffectArgs](w), nil),
		pgqueue.AddWorkerFunc(workers, work[UniqueArgs](w), nil),
		pgqueue.AddWorkerFunc(workers, work[TickArgs](w), nil),
		pgqueue.AddWorkerFunc(workers, work[XactArgs](w), &pgqueue.WorkerOpts{SingletonMode: pgqueue.SingletonXact}),
		pgqueue.AddWorkerFunc(workers, work[SessionArgs](w), &pgqueue.WorkerOpts{SingletonMode: pgqueue.SingletonSession}),
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var periodic []*pgqueue.PeriodicJob
	if o.periodic {
		periodic = append(periodic, pgqueue.NewPeriodicJob(PeriodicName, pgqueue.EverySchedule(time.Second),
			func() (pgqueue.JobArgs, *pgqueue.EnqueueOpts) { return TickArgs{}, nil }, nil))
	}
	client, err := pgqueue.New(p.Pool, &pgqueue.Config{
		Schema: p.Schema,
		ID:     p.Name,
		Queues: map[string]pgqueue.QueueConfig{
			pgqueue.QueueDefault: {MaxWorkers: o.maxWorkers},
			PausedQueue:          {MaxWorkers: o.pausedMax},
		},
		Workers:             workers,
		JobLease:            p.Lease,
		LeaderTTL:           p.Lease,
		RescueInterval:      500 * time.Millisecond,
		FetchPollInterval:   200 * time.Millisecond,
		SchedulerInterval:   200 * time.Millisecond,
		SingletonRetryDelay: 100 * time.Millisecond,
		JobTimeout:          20 * time.Second,
		// Faults must never use up a job's attempts: retry soon.
		RetryPolicy:           pgqueue.ExponentialBackoff{Base: 100 * time.Millisecond, Max: time.Second},
		CompletedJobRetention: o.retention,
		CancelledJobRetention: o.retention,
		DiscardedJobRetention: o.retention,
		PruneInterval:         o.prune,
		PeriodicJobs:          periodic,
		Logger:                p.Log,
	})
	if err != nil {
		return err
	}
	w.client = client

	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	go func() {
		select {
		case <-usr1:
			client.PeriodicJobs().Remove(PeriodicName)
			p.Say("periodic removed")
		case <-ctx.Done():
		}
	}()

	err = p.Serve(ctx, client)
	p.Say("stopped: effects=%d refusals=%d", w.effects.Load(), w.refusals.Load())
	return err
}

// soakWorker holds what the handlers share.
type soakWorker struct {
	opts   *options
	name   string
	pool   *pgxpool.Pool
	client *pgqueue.Client

	effects, refusals atomic.Int64
}

// work returns the handler of kind T.
func work[T soakArgs](w *soakWorker) func(ctx context.Context, job *pgqueue.Job[T]) error {
	return func(ctx context.Context, job *pgqueue.Job[T]) error {
		return w.work(ctx, job.JobRow, job.Args.args(), job.Tx, job.LockFence)
	}
}

// work runs one job: snoozes, planned failures, the slow wait, then the
// fenced transaction.
func (w *soakWorker) work(ctx context.Context, row *pgqueue.JobRow, a Args, jobTx pgx.Tx, lockFence int64) error {
	// Deaf to a lost lease, but not stuck forever on a dead network.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()

	if a.Snooze > 0 {
		var n int
		if err := w.pool.QueryRow(wctx, `SELECT count(*) FROM snoozes WHERE job_id = $1`, row.ID).Scan(&n); err != nil {
			return fmt.Errorf("count snoozes: %w", err)
		}
		if n < a.Snooze {
			if _, err := w.pool.Exec(wctx, `INSERT INTO snoozes (job_id, fence, worker) VALUES ($1, $2, $3)`, row.ID, row.Fence, w.name); err != nil {
				return fmt.Errorf("record snooze: %w", err)
			}
			return pgqueue.JobSnooze(time.Duration(50+rand.IntN(250)) * time.Millisecond)
		}
	}
	if row.Attempt <= a.Fail {
		return fmt.Errorf("soak: planned failure %d of %d", row.Attempt, a.Fail)
	}
	if a.SlowMS > 0 {
		if err := sleep(ctx, time.Duration(a.SlowMS)*time.Millisecond); err != nil && errors.Is(err, pgqueue.ErrJobCancelled) {
			return err
		}
		// A lost lease or a stop: write anyway, as a handler that missed
		// it would; the fences must refuse what is stale.
	}

	reason, err := w.apply(wctx, row, a, jobTx, lockFence)
	if err == nil {
		w.effects.Add(1)
		return nil
	}
	w.refuse(row, reason, err)
	return err
}

// apply writes the job's effect (and span) and completes the job in one
// transaction, Job.Tx for a SingletonXact job (pgqueue commits it), and
// says why when it fails.
func (w *soakWorker) apply(ctx context.Context, row *pgqueue.JobRow, a Args, jobTx pgx.Tx, lockFence int64) (string, error) {
	singleton := row.SingletonKey != ""
	var started time.Time
	if singleton && jobTx == nil {
		// Session mode: the run starts under the lock, outside the
		// transaction.
		if err := w.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&started); err != nil {
			return reasonError, fmt.Errorf("start: %w", err)
		}
	}
	tx := jobTx
	if tx == nil {
		var err error
		if tx, err = w.pool.Begin(ctx); err != nil {
			return reasonError, fmt.Errorf("begin: %w", err)
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	} else if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&started); err != nil {
		return reasonError, fmt.Errorf("start: %w", err)
	}

	if _, err := tx.Exec(ctx, `INSERT INTO effects (job_id, fence, worker) VALUES ($1, $2, $3)`, row.ID, row.Fence, w.name); err != nil {
		return reasonError, fmt.Errorf("insert effect: %w", err)
	}
	if !a.NoCheck {
		if err := w.client.CheckFenceTx(ctx, tx, fmt.Sprintf("job:%d", row.ID), row.Fence); err != nil {
			if pgqueue.IsStaleFence(err) {
				return reasonStaleFence, err
			}
			return reasonError, err
		}
	}
	if singleton && jobTx == nil {
		if err := w.client.CheckFenceTx(ctx, tx, pgqueue.SingletonResource(row.SingletonKey), lockFence); err != nil {
			if pgqueue.IsStaleFence(err) {
				return reasonStaleFence, err
			}
			return reasonError, err
		}
	}
	// Widen the window in which a takeover can overtake this holder.
	if err := sleep(ctx, w.sleepTime()); err != nil {
		return reasonError, err
	}
	if singleton {
		if _, err := tx.Exec(ctx, `INSERT INTO spans (job_id, key, kind, worker, fence, lock_fence, started, ended) VALUES ($1, $2, $3, $4, $5, $6, $7, clock_timestamp())`,
			row.ID, row.SingletonKey, row.Kind, w.name, row.Fence, lockFence, started); err != nil {
			return reasonError, fmt.Errorf("insert span: %w", err)
		}
	}
	if err := w.client.CompleteTx(ctx, tx, row); err != nil {
		if errors.Is(err, pgqueue.ErrJobLeaseLost) {
			return reasonLeaseLost, err
		}
		return reasonError, err
	}
	if jobTx != nil {
		return "", nil // pgqueue commits Job.Tx
	}
	if err := tx.Commit(ctx); err != nil {
		return reasonCommit, fmt.Errorf("commit: %w", err)
	}
	return "", nil
}

// refuse records a failed write in autocommit, as well as the database
// lets it: the test only reports these rows.
func (w *soakWorker) refuse(row *pgqueue.JobRow, reason string, cause error) {
	w.refusals.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = w.pool.Exec(ctx, `INSERT INTO refusals (job_id, fence, worker, reason, error) VALUES ($1, $2, $3, $4, $5)`,
		row.ID, row.Fence, w.name, reason, cause.Error())
}

func (w *soakWorker) sleepTime() time.Duration {
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
