// Command faultworker is the worker process of pgqueue's fault tests. It
// works jobs of kind "effect" on queue "default": each job writes one row
// to effects(job_id, fence, worker) under the job's fence token and
// completes the job in the same transaction. Every write it attempts that
// the database refuses (or whose outcome it cannot know) is recorded in
// refusals(job_id, fence, worker, reason, error).
//
// It prints "ready" once working and stops gracefully on SIGTERM or SIGINT,
// then prints "stopped: effects=N refusals=N". It prints "event <what>
// job=<id> fence=<n>" whenever the client logs that a job's lease was lost
// (lease-lost), its result refused by the database (result-refused) or
// dropped because the lease was lost (result-dropped), or a job claimed
// ahead handed back unrun (handed-back).
//
// Two roles serve the scenario that resumes a paused worker while its jobs
// run under another worker's fence (see the tests): with -victim, a
// handler writes as the job's "mode" arg says, at a moment the test
// controls, so that each kind of stale write (CompleteTx with and without
// CheckFenceTx, a complete, failure or snooze result, a heartbeat) reaches
// the database; with -hold, a handler holds a job listed in holds, running
// under its own newer fence, until the test releases it. Its connections carry
// application_name faultworker-<name>, and its client ID (the jobs'
// worker_id) is <name>. With -flow it works "flow" jobs too (flow.go),
// for the fault test of flow control; with -workflow, "wf" jobs
// (workflow.go), for the fault test of workflows. The flags it shares with lockworker, and its exit
// codes, are workerproc's.
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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/integration/internal/workerproc"
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
	// Mode is what a -victim worker does with the job (mode* below);
	// other workers ignore it.
	Mode string `json:"mode,omitempty"`
}

// The modes of a -victim worker's handlers. The first three wait at the
// gate (the row victims-write in gates) and then write; the last three
// return their result at once, once a heartbeat renewed the job's lease, so
// that a later heartbeat leaving the job out proves the result was handed
// over to the client's completer. Handlers that write after the gate wait,
// before they return, until the client logged their lease lost: the
// heartbeat's refusal is one of the writes under test, and the result is
// then dropped rather than mixed into the batch of pending results.
const (
	modeTxChecked    = "tx-checked"    // effect, CheckFenceTx, CompleteTx, commit
	modeTx           = "tx"            // effect, CompleteTx, commit
	modeGateComplete = "gate-complete" // return nil after the gate
	modeComplete     = "complete"      // return nil: complete_many.sql
	modeFail         = "fail"          // return an error: finish.sql
	modeSnooze       = "snooze"        // return JobSnooze: finish.sql
)

// Kind implements pgqueue.JobArgs.
func (EffectArgs) Kind() string { return "effect" }

// options are faultworker's own flags.
type options struct {
	heartbeat  time.Duration
	rescue     time.Duration
	leaderTTL  time.Duration
	poll       time.Duration
	maxWorkers int
	sleepMin   time.Duration
	sleepMax   time.Duration
	sleepAt    string
	zombie     bool
	idleTx     time.Duration
	queues     string
	batchDelay time.Duration
	victim     bool
	hold       bool
	flow       bool
	workflow   bool
}

func (o *options) register(fs *flag.FlagSet) {
	fs.DurationVar(&o.heartbeat, "heartbeat", 0, "heartbeat interval (0: lease/3)")
	fs.DurationVar(&o.rescue, "rescue", 500*time.Millisecond, "rescue interval")
	fs.DurationVar(&o.leaderTTL, "leader-ttl", 2*time.Second, "maintenance leader's lease: how soon another worker rescues and schedules when the leader dies or hangs")
	fs.DurationVar(&o.poll, "poll", 200*time.Millisecond, "fetch poll interval")
	fs.IntVar(&o.maxWorkers, "max-workers", 8, "jobs run at once")
	fs.DurationVar(&o.sleepMin, "sleep-min", 5*time.Millisecond, "least time a handler waits inside its transaction")
	fs.DurationVar(&o.sleepMax, "sleep-max", 30*time.Millisecond, "most time a handler waits inside its transaction")
	fs.StringVar(&o.sleepAt, "sleep-at", sleepAfterCheck, "where the handler waits: after-check (between CheckFenceTx and CompleteTx) or after-complete (between CompleteTx and COMMIT)")
	fs.BoolVar(&o.zombie, "zombie", true, "handlers ignore their context's cancellation in their own writes, as a handler that misses a lost lease would: only fencing keeps their writes out")
	fs.DurationVar(&o.idleTx, "idle-tx-timeout", 0, "idle_in_transaction_session_timeout of the worker's sessions (0: server default)")
	fs.StringVar(&o.queues, "queues", pgqueue.QueueDefault, "comma-separated queues to work")
	fs.DurationVar(&o.batchDelay, "complete-batch-delay", 0, "Config.CompleteBatchDelay (0: the default); a long one keeps results pending until Stop")
	fs.BoolVar(&o.victim, "victim", false, "handlers follow the job's mode arg (see the package doc)")
	fs.BoolVar(&o.hold, "hold", false, "handlers hold a job listed in holds with a lower fence, running, until it is released")
	fs.BoolVar(&o.flow, "flow", false, `work "flow" jobs too, recording their runs in flow_runs (see flow.go)`)
	fs.BoolVar(&o.workflow, "workflow", false, `work "wf" jobs too, recording the runs completed with CompleteTx in wf_runs (see workflow.go)`)
}

func (o *options) check() error {
	switch {
	case o.maxWorkers < 1:
		return errors.New("-max-workers must be at least 1")
	case o.sleepMin < 0 || o.sleepMax < o.sleepMin:
		return errors.New("need 0 <= -sleep-min <= -sleep-max")
	case o.sleepAt != sleepAfterCheck && o.sleepAt != sleepAfterComplete:
		return fmt.Errorf("-sleep-at must be %s or %s", sleepAfterCheck, sleepAfterComplete)
	}
	return nil
}

// pool sizes the pool and sets the sessions' idle transaction timeout.
func (o *options) pool(cfg *pgxpool.Config) {
	if o.idleTx > 0 {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(o.idleTx.Milliseconds())
	}
	// Every handler holds a connection for its transaction; the client
	// needs a few more for claims, heartbeats and results, and a starved
	// heartbeat would lose leases for no fault of the network.
	cfg.MaxConns = int32(o.maxWorkers + 4)
	if o.flow {
		// Flow handlers hold a connection only briefly, but each queue
		// runs up to -max-workers of them.
		cfg.MaxConns = int32(o.maxWorkers*len(strings.Split(o.queues, ",")) + 4)
	}
}

func main() {
	o := &options{}
	workerproc.Main(workerproc.Spec{
		Command:    "faultworker",
		LeaseUsage: "claim lease",
		Flags:      o.register,
		Check:      o.check,
		Pool:       o.pool,
		Run:        o.run,
	})
}

// run works jobs until ctx ends, then stops gracefully.
func (o *options) run(ctx context.Context, p *workerproc.Worker) error {
	w := &effectWorker{opts: o, name: p.Name, pool: p.Pool, leaseLost: map[int64]chan struct{}{}}
	w.lease = p.Lease
	w.log = slog.New(&eventHandler{Handler: p.Log.Handler(), w: w, say: p.Say})
	queues := map[string]pgqueue.QueueConfig{}
	for _, q := range strings.Split(o.queues, ",") {
		queues[strings.TrimSpace(q)] = pgqueue.QueueConfig{MaxWorkers: o.maxWorkers}
	}
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorker[EffectArgs](workers, w, nil); err != nil {
		return err
	}
	if o.flow {
		if err := pgqueue.AddWorker[FlowArgs](workers, flowWorker{w}, nil); err != nil {
			return err
		}
	}
	if o.workflow {
		if err := pgqueue.AddWorker[WorkflowArgs](workers, workflowWorker{w}, nil); err != nil {
			return err
		}
	}
	client, err := pgqueue.New(p.Pool, &pgqueue.Config{
		Schema:            p.Schema,
		ID:                p.Name,
		Queues:            queues,
		Workers:           workers,
		JobLease:          p.Lease,
		HeartbeatInterval: o.heartbeat,
		RescueInterval:    o.rescue,
		LeaderTTL:         o.leaderTTL,
		FetchPollInterval: o.poll,
		SchedulerInterval: o.poll,
		// Faults must never use up a job's attempts: retry soon and often.
		RetryPolicy:        pgqueue.ExponentialBackoff{Base: 100 * time.Millisecond, Max: time.Second},
		CompleteBatchDelay: o.batchDelay,
		Logger:             w.log,
	})
	if err != nil {
		return err
	}
	w.client = client
	err = p.Serve(ctx, client)
	p.Say("stopped: effects=%d refusals=%d", w.effects.Load(), w.refusals.Load())
	if err != nil {
		return err
	}
	return nil
}

// effectWorker works "effect" jobs.
type effectWorker struct {
	opts   *options
	name   string
	lease  time.Duration
	pool   *pgxpool.Pool
	client *pgqueue.Client
	log    *slog.Logger

	effects, refusals atomic.Int64

	mu sync.Mutex
	// leaseLost has a closed channel for every job the client logged lost.
	leaseLost map[int64]chan struct{}
}

// lost returns the channel closed once the client logged job's lease lost.
func (w *effectWorker) lost(job int64) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.leaseLost[job]
	if !ok {
		ch = make(chan struct{})
		w.leaseLost[job] = ch
	}
	return ch
}

// eventHandler prints an "event" line for the client's log records about
// lost leases and refused or dropped results.
type eventHandler struct {
	slog.Handler
	w   *effectWorker
	say func(format string, args ...any)
}

var events = map[string]string{
	"pgqueue: lease lost":                                                 "lease-lost",
	"pgqueue: job result refused":                                         "result-refused",
	"pgqueue: job result dropped, lease lost":                             "result-dropped",
	"pgqueue: claimed job waited too long for a free worker; handed back": "handed-back",
}

func (h *eventHandler) Handle(ctx context.Context, r slog.Record) error {
	if event, ok := events[r.Message]; ok {
		var job, fence int64
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "job":
				job = a.Value.Int64()
			case "fence":
				fence = a.Value.Int64()
			}
			return true
		})
		h.say("event %s job=%d fence=%d", event, job, fence)
		if event == "lease-lost" {
			ch := h.w.lost(job)
			h.w.mu.Lock()
			select {
			case <-ch:
			default:
				close(ch)
			}
			h.w.mu.Unlock()
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h *eventHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &eventHandler{Handler: h.Handler.WithAttrs(attrs), w: h.w, say: h.say}
}

func (h *eventHandler) WithGroup(name string) slog.Handler {
	return &eventHandler{Handler: h.Handler.WithGroup(name), w: h.w, say: h.say}
}

// workContext is the context a handler works under: ctx, or with -zombie
// one deaf to a lost lease, but not stuck forever on a dead network.
func (w *effectWorker) workContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if w.opts.zombie {
		return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	}
	return ctx, func() {}
}

// Work writes the job's effect and completes the job in one transaction,
// both fenced by the job's token.
func (w *effectWorker) Work(ctx context.Context, job *pgqueue.Job[EffectArgs]) error {
	wctx, cancel := w.workContext(ctx)
	defer cancel()
	if w.opts.hold {
		w.holdWhileListed(ctx, job)
	}
	if w.opts.victim && job.Args.Mode != "" {
		return w.victimWork(ctx, wctx, job)
	}
	reason, err := w.apply(wctx, job, true, true)
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
func (w *effectWorker) apply(ctx context.Context, job *pgqueue.Job[EffectArgs], check, wait bool) (string, error) {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return reasonError, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	if _, err := tx.Exec(ctx, `INSERT INTO effects (job_id, fence, worker) VALUES ($1, $2, $3)`,
		job.ID, job.Fence, w.name); err != nil {
		return reasonError, fmt.Errorf("insert effect: %w", err)
	}
	if check {
		if err := w.client.CheckFenceTx(ctx, tx, fmt.Sprintf("job:%d", job.ID), job.Fence); err != nil {
			if pgqueue.IsStaleFence(err) {
				return reasonStaleFence, err
			}
			return reasonError, err
		}
	}
	// Widen the window in which a takeover can overtake this holder.
	if wait && w.opts.sleepAt == sleepAfterCheck {
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
	if wait && w.opts.sleepAt == sleepAfterComplete {
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

// victimWork is a -victim handler: see the mode constants.
func (w *effectWorker) victimWork(ctx, wctx context.Context, job *pgqueue.Job[EffectArgs]) error {
	switch job.Args.Mode {
	case modeTxChecked, modeTx, modeGateComplete:
		w.step(wctx, job, "gate")
		if err := w.poll(wctx, `SELECT EXISTS (SELECT 1 FROM gates WHERE name = 'victims-write')`); err != nil {
			return err
		}
		var err error
		if job.Args.Mode != modeGateComplete {
			var reason string
			reason, err = w.apply(wctx, job, job.Args.Mode == modeTxChecked, false)
			if err == nil {
				w.effects.Add(1)
			} else {
				w.refuse(ctx, job, reason, err)
			}
		}
		// The heartbeat's refusal is under test too: wait for it.
		select {
		case <-w.lost(job.ID):
		case <-wctx.Done():
		}
		w.step(wctx, job, "wrote")
		return err
	case modeComplete, modeFail, modeSnooze:
		// Return once a heartbeat renewed the lease: the next one leaves
		// the job out, which tells the test the result was handed over.
		if err := w.poll(wctx, `SELECT lease_until > attempted_at + $2::bigint * interval '1 microsecond' FROM pgqueue.jobs WHERE id = $1`,
			job.ID, w.lease.Microseconds()); err != nil {
			return err
		}
		w.step(wctx, job, "returned")
		switch job.Args.Mode {
		case modeFail:
			return errors.New("victim: a stale failure")
		case modeSnooze:
			return pgqueue.JobSnooze(time.Minute)
		}
		return nil
	}
	return fmt.Errorf("unknown mode %q", job.Args.Mode)
}

// holdWhileListed waits while job is listed in holds with a lower fence
// than its own and not released, or until ctx ends.
func (w *effectWorker) holdWhileListed(ctx context.Context, job *pgqueue.Job[EffectArgs]) {
	var held bool
	if err := w.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM holds WHERE job_id = $1 AND fence < $2)`, job.ID, job.Fence).Scan(&held); err != nil || !held {
		return
	}
	w.step(ctx, job, "holding")
	_ = w.poll(ctx, `SELECT NOT EXISTS (SELECT 1 FROM holds WHERE job_id = $1 AND fence < $2 AND NOT released)`, job.ID, job.Fence)
}

// poll runs a query of one boolean every 20ms until it is true.
func (w *effectWorker) poll(ctx context.Context, query string, args ...any) error {
	for {
		var ok bool
		err := w.pool.QueryRow(ctx, query, args...).Scan(&ok)
		if err == nil && ok {
			return nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// step records that a handler reached a point the test waits for.
func (w *effectWorker) step(ctx context.Context, job *pgqueue.Job[EffectArgs], step string) {
	if _, err := w.pool.Exec(ctx, `INSERT INTO steps (job_id, fence, worker, step) VALUES ($1, $2, $3, $4)`,
		job.ID, job.Fence, w.name, step); err != nil {
		w.log.Warn("recording step failed", "job", job.ID, "step", step, "err", err)
	}
}

// refuse records a failed write in autocommit, as well as the database
// lets it: the tests only report these rows.
func (w *effectWorker) refuse(ctx context.Context, job *pgqueue.Job[EffectArgs], reason string, cause error) {
	w.refusals.Add(1)
	w.log.Debug("write refused", "job", job.ID, "fence", job.Fence, "reason", reason, "err", cause)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := w.pool.Exec(ctx, `INSERT INTO refusals (job_id, fence, worker, reason, error) VALUES ($1, $2, $3, $4, $5)`,
		job.ID, job.Fence, w.name, reason, cause.Error())
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
