package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgqueue/pgqueue/internal/notifier"
	"github.com/pgqueue/pgqueue/pglock"
)

// Worker works jobs of one kind. Work returns nil when the job is done, an
// error to have it retried (or discarded once its attempts are used up),
// JobCancel to end it without retry, or JobSnooze to run it again later.
//
// ctx ends when the job's timeout passes or the client stops; handlers must
// return soon after. Work may run again for the same job after a crash or a
// lost lease, so make it idempotent or fence its writes with job.Fence.
type Worker[T JobArgs] interface {
	Work(ctx context.Context, job *Job[T]) error
}

// WorkFunc adapts a function to Worker.
type WorkFunc[T JobArgs] func(ctx context.Context, job *Job[T]) error

// Work calls f.
func (f WorkFunc[T]) Work(ctx context.Context, job *Job[T]) error { return f(ctx, job) }

// WorkerOpts are the options of one registered kind.
type WorkerOpts struct {
	// Timeout bounds each run of the handler. Zero means Config.JobTimeout;
	// negative means no limit.
	Timeout time.Duration
	// SingletonMode is how jobs of this kind that have a SingletonKey hold
	// their lock. Default SingletonXact.
	SingletonMode SingletonMode
}

// Workers holds the handlers of a client, by job kind. Register with
// AddWorker or AddWorkerFunc before starting the client.
type Workers struct {
	mu     sync.RWMutex
	byKind map[string]*registeredWorker
}

// registeredWorker is a handler with its type erased.
type registeredWorker struct {
	timeout time.Duration
	mode    SingletonMode
	// decode turns a claimed row into the *Job[T] that work takes. The
	// producer decodes, not the executor: decoding JSON grows a goroutine's
	// stack, and a thousand executors, their stacks shrunk again at every
	// GC, would each pay for copying it.
	decode func(row *JobRow) (any, error)
	work   func(ctx context.Context, job any, grant lockGrant) error
}

// NewWorkers returns an empty registry.
func NewWorkers() *Workers {
	return &Workers{byKind: map[string]*registeredWorker{}}
}

// AddWorker registers w for the kind T's zero value names. opts may be nil.
// It returns ErrDuplicateWorker when the kind already has a worker and
// ErrInvalidKind when the kind is empty.
func AddWorker[T JobArgs](ws *Workers, w Worker[T], opts *WorkerOpts) error {
	var zero T
	kind := zero.Kind()
	if err := validateKind(kind); err != nil {
		return err
	}
	if opts == nil {
		opts = &WorkerOpts{}
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if _, ok := ws.byKind[kind]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateWorker, kind)
	}
	ws.byKind[kind] = &registeredWorker{
		timeout: opts.Timeout,
		mode:    opts.SingletonMode,
		decode: func(row *JobRow) (any, error) {
			job, err := decodeArgs[T](row)
			if err != nil {
				return nil, fmt.Errorf("%w: decode args of %s job %d: %w", ErrInvalidArgs, kind, row.ID, err)
			}
			return job, nil
		},
		work: func(ctx context.Context, job any, grant lockGrant) error {
			j := job.(*Job[T])
			j.Tx, j.LockFence = grant.tx, grant.fence
			return w.Work(ctx, j)
		},
	}
	return nil
}

// AddWorkerFunc registers fn for the kind T's zero value names, like
// AddWorker.
func AddWorkerFunc[T JobArgs](ws *Workers, fn func(ctx context.Context, job *Job[T]) error, opts *WorkerOpts) error {
	return AddWorker[T](ws, WorkFunc[T](fn), opts)
}

func (ws *Workers) lookup(kind string) *registeredWorker {
	ws.mu.RLock()
	defer ws.mu.RUnlock()
	return ws.byKind[kind]
}

// runState is what a started client runs; Stop tears it down.
type runState struct {
	// base is Start's context, detached from cancellation: the parent of
	// the writes that record results, so they land even while stopping.
	base context.Context
	// fetch ends when Stop begins: producers, the scheduler and the
	// rescuer watch it.
	fetch       context.Context
	cancelFetch context.CancelFunc
	// jobs is the parent of every job's context; Stop cancels it with
	// ErrStopping once its own deadline passed.
	jobs       context.Context
	cancelJobs context.CancelCauseFunc
	// jobParent is jobs without its cancellation, the parent of each job's
	// context; active.cancelAll passes jobs' cancellation on.
	jobParent context.Context

	producers map[string]*producer
	// elector campaigns for the maintenance lease; the poller nudges it.
	elector   *pglock.Elector
	notifier  *notifier.Notifier // nil when the client works no queue
	active    activeJobs
	completer *completer
	loops     sync.WaitGroup // producers, poller, elector
	running   sync.WaitGroup // jobs being executed
	executors sync.WaitGroup // executor goroutines
	// Heartbeats go on while running jobs finish during Stop.
	heartbeatsDone chan struct{}
	heartbeats     sync.WaitGroup
}

// Start begins working the configured queues and running the scheduler.
// Cancelling ctx stops fetching and cancels running jobs, which are handed
// back to their queue; call Stop for a graceful end.
func (c *Client) Start(ctx context.Context) error {
	if err := ctxError(ctx, "start"); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running != nil {
		return ErrAlreadyStarted
	}
	if err := c.pool.Ping(ctx); err != nil {
		return dbError("start", err)
	}
	rs := &runState{
		base:           context.WithoutCancel(ctx),
		producers:      map[string]*producer{},
		active:         newActiveJobs(),
		heartbeatsDone: make(chan struct{}),
	}
	rs.fetch, rs.cancelFetch = context.WithCancel(ctx)
	rs.jobs, rs.cancelJobs = context.WithCancelCause(ctx)
	rs.jobParent = context.WithoutCancel(rs.jobs)
	context.AfterFunc(rs.jobs, func() { rs.active.cancelAll(context.Cause(rs.jobs)) })
	rs.completer = newCompleter(c, rs)
	go rs.completer.run()
	for name, qc := range c.config.Queues {
		p := &producer{
			client: c,
			rs:     rs,
			queue:  name,
			max:    qc.MaxWorkers,
			wakeCh: make(chan struct{}, 1),
			doneCh: make(chan struct{}, 1),
			// Claims may run up to MaxWorkers ahead (see claimAhead).
			claimed: make(chan claimedJob, 2*qc.MaxWorkers),
		}
		rs.producers[name] = p
		rs.loops.Add(1)
		go p.run()
	}
	electorCfg := &pglock.ElectorConfig{Holder: c.config.ID, TTL: c.config.LeaderTTL}
	if len(rs.producers) > 0 {
		// The poller checks the lease anyway and nudges the elector when
		// it is free; followers need not ask again every few seconds.
		electorCfg.RetryInterval = 3 * c.config.LeaderTTL
	}
	elector, err := c.locks.NewElector(maintenanceLease, electorCfg)
	if err != nil {
		return err
	}
	rs.elector = elector
	if len(rs.producers) > 0 {
		rs.loops.Add(1)
		go c.runPoller(rs)
		rs.notifier, err = notifier.Start(rs.fetch, notifier.Config{
			ConnConfig: c.pool.Config().ConnConfig.Copy(),
			Channel:    pgx.Identifier{c.channel}.Sanitize(),
			OnNotify: func(queue string) {
				if p := rs.producers[queue]; p != nil {
					p.wake()
				}
			},
			// Notifications sent while disconnected are lost: look again.
			OnConnect: func() {
				for _, p := range rs.producers {
					p.wake()
				}
			},
			OnError: func(err error) { c.log.Warn("pgqueue: listen connection failed; polling meanwhile", "err", err) },
		})
		if err != nil {
			return err
		}
	}
	rs.loops.Add(1)
	go func() {
		defer rs.loops.Done()
		elector.Run(rs.fetch, func(ctx context.Context, term int64) { c.runMaintenance(rs, ctx, term) })
	}()
	rs.heartbeats.Add(1)
	go c.runHeartbeats(rs)
	c.running = rs
	return nil
}

// Stop stops fetching new jobs and waits for running ones to finish and
// their results to be written. When ctx ends first, Stop cancels the jobs
// still running (their context's cause is ErrStopping), waits up to
// Config.CancelGrace for their handlers to return, hands those jobs back to
// their queue without spending an attempt, and returns ctx's error. A
// handler that ignores its context past the grace is left running; its job
// stays claimed until its lease ends.
func (c *Client) Stop(ctx context.Context) error {
	c.mu.Lock()
	rs := c.running
	c.running = nil
	c.mu.Unlock()
	if rs == nil {
		return ErrNotStarted
	}
	rs.cancelFetch()
	rs.loops.Wait()
	if rs.notifier != nil {
		rs.notifier.Stop()
	}
	defer func() {
		// Results are written before heartbeats end: until then the jobs
		// are still claimed. Past Stop's deadline, failing writes are not
		// retried: the rescuer will find those jobs.
		stopHurry := context.AfterFunc(ctx, func() { close(rs.completer.hurry) })
		defer stopHurry()
		close(rs.completer.quit)
		<-rs.completer.done
		close(rs.heartbeatsDone)
		rs.heartbeats.Wait()
	}()

	done := make(chan struct{})
	go func() {
		rs.running.Wait()
		rs.executors.Wait() // idle ones end once their producer closed claimed
		close(done)
	}()
	select {
	case <-done:
		rs.cancelJobs(ErrStopping)
		return nil
	case <-ctx.Done():
	}
	rs.cancelJobs(ErrStopping)
	grace := time.NewTimer(c.config.CancelGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		c.log.Warn("pgqueue: handlers still running after cancel grace; their jobs wait for lease expiry", "grace", c.config.CancelGrace)
	}
	return fmt.Errorf("pgqueue: stop: %w", ctx.Err())
}

// wake tells the local producer of queue, if any, that jobs may be waiting.
func (c *Client) wake(queue string) {
	c.mu.Lock()
	rs := c.running
	c.mu.Unlock()
	if rs == nil {
		return
	}
	if p := rs.producers[queue]; p != nil {
		p.wake()
	}
}

// producer claims jobs of one queue up to its free slots and hands each to
// an executor goroutine.
type producer struct {
	client *Client
	rs     *runState
	queue  string
	max    int
	// claimed feeds the executors, started as needed up to max and kept:
	// a goroutine per job would grow a fresh stack for every job.
	claimed   chan claimedJob
	executors int
	idle      atomic.Int32  // executors waiting on claimed
	wakeCh    chan struct{} // capacity 1: a pending wake-up
	// finished counts the jobs finished since the producer last looked;
	// doneCh (capacity 1) tells it to look. One wake-up per batch of
	// finished jobs instead of a channel send per job.
	finished atomic.Int64
	doneCh   chan struct{}
}

// jobDone tells the producer that one of its jobs finished.
func (p *producer) jobDone() {
	p.finished.Add(1)
	select {
	case p.doneCh <- struct{}{}:
	default: // a signal is pending: the producer will count this one too
	}
}

func (p *producer) wake() {
	select {
	case p.wakeCh <- struct{}{}:
	default:
	}
}

// claimedJob is a claimed job on its way to an executor: the row, when its
// claim was sent and when its reply came, its worker (nil for an unknown
// kind) and the decoded *Job[T] or the error decoding it.
type claimedJob struct {
	row       *JobRow
	sent      time.Time
	received  time.Time
	w         *registeredWorker
	job       any
	decodeErr error
}

// dispatch hands a claimed job to an idle executor, starting one if none
// is idle.
func (p *producer) dispatch(j claimedJob) {
	if p.idle.Load() == 0 && p.executors < p.max {
		p.executors++
		p.rs.executors.Add(1)
		go p.runExecutor()
	}
	p.claimed <- j // buffered to 2*max: never blocks
}

func (p *producer) runExecutor() {
	defer p.rs.executors.Done()
	for {
		p.idle.Add(1)
		j, ok := <-p.claimed
		p.idle.Add(-1)
		if !ok {
			return
		}
		p.client.execute(p, &j)
	}
}

func (p *producer) run() {
	defer p.rs.loops.Done()
	c := p.client
	results := make(chan claimResult, maxClaimsInFlight)
	inflight := 0 // claims sent and not yet answered
	reserved := 0 // the jobs those claims may bring
	running := 0  // jobs dispatched and not yet finished
	dispatch := func(r claimResult) {
		received := time.Now()
		if c.testHooks.claimAged != 0 {
			r.sent, received = r.sent.Add(-c.testHooks.claimAged), received.Add(-c.testHooks.claimAged)
		}
		for _, row := range r.jobs {
			running++
			p.rs.running.Add(1)
			j := claimedJob{row: row, sent: r.sent, received: received, w: c.config.Workers.lookup(row.Kind)}
			if j.w != nil {
				j.job, j.decodeErr = j.w.decode(row)
			}
			p.dispatch(j)
		}
	}
	defer func() {
		// Claims in flight may commit: their jobs are run like the others.
		// Then executors finish the jobs handed over, and end.
		for ; inflight > 0; inflight-- {
			dispatch(<-results)
		}
		close(p.claimed)
	}()
	fetchNow := true
	// refill fires a claim for the room made so far, ClaimBatchDelay after
	// the first of it (see below).
	refill := time.NewTimer(time.Hour)
	refill.Stop()
	defer refill.Stop()
	refillArmed := false
	refillDue := false // the refill timer fired: claim whatever room there is
	// more is true while the last claim filled all the room it asked for,
	// so the queue probably holds more: a finished job is then a reason to
	// claim again at once rather than at the next poll.
	more := false
	// woken is true when a notification, the poller or the scheduler asked
	// for this claim: jobs are waiting that no claim has seen, so it goes
	// out at once.
	woken := false
	var ahead claimAhead
	for {
		// room is how many jobs a claim may take now: the free slots, and
		// with a backlog also the jobs expected to finish while a claim is
		// in flight, so that the next batch is there when they do.
		limit := p.max
		if more {
			limit += ahead.jobs(p.max)
		}
		room := limit - running - reserved
		// With a backlog, jobs finishing every few microseconds would make
		// claims of a few rows each, and every claim is a commit: unless
		// room is a whole batch, wait up to ClaimBatchDelay from the first
		// free slot and claim all the room made by then in one statement.
		if fetchNow && !woken && !refillDue && room > 0 && room < p.max && running > 0 && c.config.ClaimBatchDelay > 0 {
			if !refillArmed {
				refill.Reset(c.config.ClaimBatchDelay)
				refillArmed = true
			}
			fetchNow = false
		}
		// No claim takes more than MaxWorkers rows; room beyond that goes
		// to a second claim at once.
		for fetchNow && room > 0 && inflight < maxClaimsInFlight && p.rs.fetch.Err() == nil {
			if refillArmed {
				refill.Stop()
				refillArmed = false
			}
			refillDue, woken = false, false
			sent := time.Now()
			ahead.sending(sent)
			want := min(room, p.max)
			inflight++
			reserved += want
			room -= want
			fetchNow = room > 0
			go func() {
				jobs, err := c.claim(p.rs, p.queue, want)
				results <- claimResult{want: want, sent: sent, jobs: jobs, err: err}
			}()
		}
		select {
		case <-p.rs.fetch.Done():
			return
		case r := <-results:
			inflight--
			reserved -= r.want
			ahead.returned(r.sent)
			if r.err != nil {
				c.log.Error("pgqueue: claim failed", "queue", p.queue, "err", r.err)
				more = false
				continue
			}
			dispatch(r)
			more = len(r.jobs) == r.want
			fetchNow = fetchNow || more
		case <-p.doneCh:
			// Every job that finished meanwhile counts, so one claim fills
			// all the free slots.
			n := int(p.finished.Swap(0))
			running -= n
			ahead.finished += n
			// A wake-up that came while every slot was taken still counts.
			fetchNow = fetchNow || more
		case <-p.wakeCh:
			fetchNow, woken = true, true
		case <-refill.C:
			refillArmed = false
			refillDue = true
			fetchNow = true
		}
	}
}

// maxClaimsInFlight is how many claims a producer may have sent and not yet
// seen answered. A second claim overlaps the first's round trip when jobs
// are short; SKIP LOCKED keeps the two from taking the same rows.
const maxClaimsInFlight = 2

// claimResult is what a claim sent by a producer brought back.
type claimResult struct {
	want int
	sent time.Time
	jobs []*JobRow
	err  error
}

// claimAhead estimates how many running jobs will finish during one claim
// round trip: the rate jobs finished at between recent claims, times the
// recent claim latency. Claiming that many beyond the free slots keeps the
// slots busy while the next claim is in flight, instead of leaving them
// idle for a round trip per batch. Short jobs are where this pays; for
// long ones the estimate is near zero, so a client never holds jobs that
// another client's idle workers could have started much sooner.
type claimAhead struct {
	finished int       // jobs finished since the last claim was sent
	lastSent time.Time // when the last claim was sent
	rate     float64   // jobs finished per second, moving average
	latency  float64   // seconds per claim, moving average
}

const aheadSmoothing = 0.25

func (a *claimAhead) sending(now time.Time) {
	if !a.lastSent.IsZero() {
		d := now.Sub(a.lastSent)
		if d < time.Millisecond {
			return // two claims sent together: measure across both
		}
		a.rate += aheadSmoothing * (float64(a.finished)/d.Seconds() - a.rate)
	}
	a.lastSent, a.finished = now, 0
}

func (a *claimAhead) returned(sent time.Time) {
	a.latency += aheadSmoothing * (time.Since(sent).Seconds() - a.latency)
}

// jobs is the number to claim ahead, at most limit.
func (a *claimAhead) jobs(limit int) int {
	return min(int(a.rate*a.latency), limit)
}

// runPoller asks once per FetchPollInterval which of the client's queues
// have available jobs and wakes their producers: the fallback for
// notifications missed or never sent.
func (c *Client) runPoller(rs *runState) {
	defer rs.loops.Done()
	queues := make([]string, 0, len(rs.producers))
	for q := range rs.producers {
		queues = append(queues, q)
	}
	tick := time.NewTicker(c.config.FetchPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-rs.fetch.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(rs.fetch, writeTimeout)
		rows, err := c.pool.Query(ctx, c.q.poll, queues, maintenanceLease)
		if err == nil {
			var q *string
			_, err = pgx.ForEachRow(rows, []any{&q}, func() error {
				if q == nil {
					rs.elector.Nudge() // the leader's lease is free: campaign now
					return nil
				}
				rs.producers[*q].wake()
				return nil
			})
		}
		cancel()
		if err != nil && rs.fetch.Err() == nil {
			c.log.Error("pgqueue: poll failed", "err", err)
		}
	}
}

// writeTimeout bounds each statement that records a job's result.
const writeTimeout = 15 * time.Second

func (c *Client) claim(rs *runState, queue string, limit int) ([]*JobRow, error) {
	// Not the fetch context: a claim cancelled in flight may still commit,
	// and its rows would then wait for their lease with no one working them.
	ctx, cancel := context.WithTimeout(rs.base, writeTimeout)
	defer cancel()
	rows, err := c.pool.Query(ctx, c.q.claim, queue, limit, c.config.JobLease.Microseconds(), c.config.ID)
	if err != nil {
		return nil, dbError("claim "+queue, err)
	}
	jobs, err := collectJobRows(rows)
	if err != nil {
		return nil, dbError("claim "+queue, err)
	}
	return jobs, nil
}

// execute runs one claimed job and records its result.
func (c *Client) execute(p *producer, cj *claimedJob) {
	defer p.jobDone()
	defer p.rs.running.Done()

	row, w := cj.row, cj.w
	if waited := time.Since(cj.received); waited > c.config.JobLease/3 {
		// Claimed ahead and kept waiting by slow jobs, its lease unrenewed
		// for longer than a heartbeat interval: hand it back at once,
		// attempt unspent, for a free worker anywhere to take.
		c.log.Warn("pgqueue: claimed job waited too long for a free worker; handed back", "job", row.ID, "kind", row.Kind, "waited", waited)
		c.finish(p.rs, result{row: row, op: opRelease})
		return
	}
	ctx, cancel := context.WithCancelCause(p.rs.jobParent)
	defer cancel(nil)
	job := p.rs.active.add(row, cancel, cj.sent, c.config.JobLease)
	if w == nil {
		p.rs.active.remove(job)
		note := fmt.Sprintf("%s %q; waiting %s for a worker that knows it", ErrUnknownKind, row.Kind, c.config.UnknownKindDelay)
		c.finish(p.rs, result{row: row, op: opSnooze, err: &note, delay: c.config.UnknownKindDelay})
		return
	}
	timeout := w.timeout
	if timeout == 0 {
		timeout = c.config.JobTimeout
	}
	handlerCtx, cancelTimeout := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		handlerCtx, cancelTimeout = context.WithTimeout(ctx, timeout)
	}
	var err error
	var trace string
	// release frees a session-mode singleton's lock: once the result is
	// written, so the key's next job never sees this one still running.
	var release func()
	defer func() {
		if release != nil { // no result was handed over
			release()
		}
	}()
	record := func(r result) {
		r.written, release = release, nil
		c.finish(p.rs, r)
	}
	if row.SingletonKey == "" {
		trace, err = runHandler(handlerCtx, cj, lockGrant{})
	} else {
		run := c.runSingleton(ctx, handlerCtx, cancel, job, cj)
		release = run.release
		if run.busy {
			cancelTimeout()
			p.rs.active.remove(job)
			c.finish(p.rs, result{row: row, op: opSnooze, delay: c.config.SingletonRetryDelay})
			return
		}
		err, trace = run.err, run.trace
	}
	cancelTimeout()
	p.rs.active.remove(job)

	var (
		cancelErr *jobCancelError
		snoozeErr *jobSnoozeError
	)
	switch {
	case job.completedInTx.Load() && c.landed(p.rs, row):
		// The handler's CompleteTx committed: nothing left to write.
	case job.lost.Load():
		// A heartbeat found the claim gone; a write would be refused.
		c.log.Warn("pgqueue: job result dropped, lease lost", "job", row.ID, "kind", row.Kind, "fence", row.Fence, "err", err)
	case err == nil:
		record(result{row: row, op: opComplete})
	case p.rs.jobs.Err() != nil:
		// Cancelled because the client is stopping: not the job's fault.
		record(result{row: row, op: opRelease})
	case errors.As(err, &cancelErr):
		msg := cancelErr.err.Error()
		record(result{row: row, op: opCancel, err: &msg})
	case errors.As(err, &snoozeErr):
		record(result{row: row, op: opSnooze, delay: snoozeErr.after})
	default:
		var traceArg *string
		if trace != "" {
			traceArg = &trace
		}
		msg := err.Error()
		delay := c.config.RetryPolicy.NextRetry(row.Attempt, err)
		record(result{row: row, op: opFail, err: &msg, trace: traceArg, delay: delay})
	}
}

// runHandler runs the handler, turning a panic into an error and a stack.
func runHandler(ctx context.Context, cj *claimedJob, grant lockGrant) (trace string, err error) {
	if cj.decodeErr != nil {
		return "", cj.decodeErr
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
			trace = string(debug.Stack())
		}
	}()
	return "", cj.w.work(ctx, cj.job, grant)
}

// finish hands a job's result to the completer.
func (c *Client) finish(rs *runState, r result) { rs.completer.send(r) }

func isServerError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && !strings.HasPrefix(pgErr.Code, "40") && !strings.HasPrefix(pgErr.Code, "57P")
}

// maintenanceLease is the lease whose holder runs the scheduler and the
// rescuer: one client per schema at a time.
const maintenanceLease = "pgqueue:maintenance"

// runMaintenance runs the leader's loops for one term, until ctx ends.
func (c *Client) runMaintenance(rs *runState, ctx context.Context, term int64) {
	c.log.Debug("pgqueue: leading maintenance", "term", term)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.runScheduler(rs, ctx) }()
	go func() { defer wg.Done(); c.runRescuer(rs, ctx) }()
	wg.Wait()
}

// runScheduler makes due scheduled jobs available and wakes the local
// producers of their queues, until ctx ends.
func (c *Client) runScheduler(rs *runState, ctx context.Context) {
	const batch = 1000
	tick := time.NewTicker(c.config.SchedulerInterval)
	defer tick.Stop()
	for {
		for {
			queues, err := c.scheduleDue(rs, batch)
			if err != nil {
				c.log.Error("pgqueue: scheduler failed", "err", err)
				break
			}
			for q := range queues.set {
				c.wake(q)
			}
			if queues.n < batch || ctx.Err() != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

type queueSet struct {
	n   int
	set map[string]struct{}
}

func (c *Client) scheduleDue(rs *runState, limit int) (queueSet, error) {
	ctx, cancel := context.WithTimeout(rs.base, writeTimeout)
	defer cancel()
	out := queueSet{set: map[string]struct{}{}}
	rows, err := c.pool.Query(ctx, c.q.schedule, limit, c.channel)
	if err != nil {
		return out, dbError("schedule", err)
	}
	defer rows.Close()
	for rows.Next() {
		var q string
		var n int
		if err := rows.Scan(&q, &n, nil); err != nil {
			return out, dbError("schedule", err)
		}
		out.n += n
		out.set[q] = struct{}{}
	}
	return out, dbError("schedule", rows.Err())
}
