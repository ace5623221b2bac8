package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
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
	work    func(ctx context.Context, row *JobRow) error
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
		work: func(ctx context.Context, row *JobRow) error {
			job, err := decodeArgs[T](row)
			if err != nil {
				return fmt.Errorf("%w: decode args of %s job %d: %w", ErrInvalidArgs, kind, row.ID, err)
			}
			return w.Work(ctx, job)
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
	// fetch ends when Stop begins: producers and the scheduler watch it.
	fetch       context.Context
	cancelFetch context.CancelFunc
	// jobs is the parent of every job's context; Stop cancels it with
	// ErrStopping once its own deadline passed.
	jobs       context.Context
	cancelJobs context.CancelCauseFunc

	producers map[string]*producer
	loops     sync.WaitGroup // producers and the scheduler
	running   sync.WaitGroup // executors
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
	rs := &runState{base: context.WithoutCancel(ctx), producers: map[string]*producer{}}
	rs.fetch, rs.cancelFetch = context.WithCancel(ctx)
	rs.jobs, rs.cancelJobs = context.WithCancelCause(ctx)
	for name, qc := range c.config.Queues {
		p := &producer{
			client: c,
			rs:     rs,
			queue:  name,
			max:    qc.MaxWorkers,
			wakeCh: make(chan struct{}, 1),
			doneCh: make(chan struct{}, qc.MaxWorkers),
		}
		rs.producers[name] = p
		rs.loops.Add(1)
		go p.run()
	}
	rs.loops.Add(1)
	go c.runScheduler(rs)
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

	done := make(chan struct{})
	go func() {
		rs.running.Wait()
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

// producer claims jobs of one queue up to its free slots and starts an
// executor for each.
type producer struct {
	client *Client
	rs     *runState
	queue  string
	max    int
	wakeCh chan struct{} // capacity 1: a pending wake-up
	doneCh chan struct{} // capacity max: one send per finished job
}

func (p *producer) wake() {
	select {
	case p.wakeCh <- struct{}{}:
	default:
	}
}

func (p *producer) run() {
	defer p.rs.loops.Done()
	c := p.client
	poll := time.NewTimer(0)
	defer poll.Stop()
	running := 0
	fetchNow := true
	// more is true while the last claim filled every slot it asked for, so
	// the queue probably holds more: a finished job is then a reason to
	// claim again at once rather than at the next poll.
	more := false
	for {
		if fetchNow && running < p.max && p.rs.fetch.Err() == nil {
			want := p.max - running
			jobs, err := c.claim(p.rs, p.queue, want)
			switch {
			case err != nil:
				c.log.Error("pgqueue: claim failed", "queue", p.queue, "err", err)
				more = false
			default:
				for _, row := range jobs {
					running++
					p.rs.running.Add(1)
					go c.execute(p, row)
				}
				more = len(jobs) == want
			}
			fetchNow = false
			poll.Reset(c.config.FetchPollInterval)
		}
		select {
		case <-p.rs.fetch.Done():
			return
		case <-p.doneCh:
			running--
			// Collect every other job that finished meanwhile, so one claim
			// fills all the free slots.
			for drained := false; !drained; {
				select {
				case <-p.doneCh:
					running--
				default:
					drained = true
				}
			}
			fetchNow = more
		case <-p.wakeCh:
			fetchNow = true
		case <-poll.C:
			fetchNow = true
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
	rows, err := c.pool.Query(ctx, c.q.claim, queue, limit, c.config.Lease.Microseconds(), c.config.ID)
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
func (c *Client) execute(p *producer, row *JobRow) {
	defer func() { p.doneCh <- struct{}{} }()
	defer p.rs.running.Done()

	w := c.config.Workers.lookup(row.Kind)
	if w == nil {
		note := fmt.Sprintf("%s %q; waiting %s for a worker that knows it", ErrUnknownKind, row.Kind, c.config.UnknownKindDelay)
		c.record(p.rs, row, c.q.snooze, c.config.UnknownKindDelay.Microseconds(), note)
		return
	}
	timeout := w.timeout
	if timeout == 0 {
		timeout = c.config.JobTimeout
	}
	ctx, cancel := p.rs.jobs, context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	err, trace := runHandler(ctx, w, row)
	cancel()

	var (
		cancelErr *jobCancelError
		snoozeErr *jobSnoozeError
	)
	switch {
	case err == nil:
		c.record(p.rs, row, c.q.complete)
	case p.rs.jobs.Err() != nil:
		// Cancelled because the client is stopping: not the job's fault.
		c.record(p.rs, row, c.q.release)
	case errors.As(err, &cancelErr):
		c.record(p.rs, row, c.q.cancel, cancelErr.err.Error())
	case errors.As(err, &snoozeErr):
		c.record(p.rs, row, c.q.snooze, snoozeErr.after.Microseconds(), nil)
	default:
		var traceArg *string
		if trace != "" {
			traceArg = &trace
		}
		delay := c.config.RetryPolicy.NextRetry(row.Attempt, err)
		c.record(p.rs, row, c.q.fail, err.Error(), traceArg, delay.Microseconds())
	}
}

// runHandler runs the handler, turning a panic into an error and a stack.
func runHandler(ctx context.Context, w *registeredWorker, row *JobRow) (err error, trace string) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
			trace = string(debug.Stack())
		}
	}()
	return w.work(ctx, row), ""
}

// record runs a fenced write about row (complete.sql, fail.sql, ...) whose
// first two parameters are the job's id and fence.
func (c *Client) record(rs *runState, row *JobRow, query string, args ...any) {
	ctx, cancel := context.WithTimeout(rs.base, writeTimeout)
	defer cancel()
	tag, err := c.pool.Exec(ctx, query, append([]any{row.ID, row.Fence}, args...)...)
	switch {
	case err != nil:
		// The job stays running under its lease; it is not lost.
		c.log.Error("pgqueue: recording job result failed", "job", row.ID, "kind", row.Kind, "err", err)
	case tag.RowsAffected() == 0:
		c.log.Warn("pgqueue: job result refused", "job", row.ID, "kind", row.Kind, "fence", row.Fence, "err", ErrLeaseLost)
	}
}

// runScheduler makes due scheduled jobs available and wakes the local
// producers of their queues.
func (c *Client) runScheduler(rs *runState) {
	defer rs.loops.Done()
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
			if queues.n < batch || rs.fetch.Err() != nil {
				break
			}
		}
		select {
		case <-rs.fetch.Done():
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
	rows, err := c.pool.Query(ctx, c.q.schedule, limit)
	if err != nil {
		return out, dbError("schedule", err)
	}
	defer rows.Close()
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			return out, dbError("schedule", err)
		}
		out.n++
		out.set[q] = struct{}{}
	}
	return out, dbError("schedule", rows.Err())
}
