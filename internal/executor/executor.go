package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/completer"
	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/pglock"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// ClaimedJob is a claimed job on its way to an executor: the row, when its
// claim was sent and when its reply came, its worker (nil for an unknown
// kind) and the decoded *Job[T] or the error decoding it. The producer
// allocates them a claim at a time.
type ClaimedJob struct {
	row       *pgqueuetype.JobRow
	sent      time.Time
	received  time.Time
	w         *Worker
	job       any
	decodeErr error
	// middleware is the client's work middleware, outside the worker's.
	middleware []WorkMiddleware
	// handlerCtx is the context the handler got, with what middleware
	// added (a span): the job's log records use it, so trace ids reach
	// them. Nil when no handler ran.
	handlerCtx context.Context
	// active is the job's entry in the registry of running jobs, kept
	// here so that one allocation (the producer's, per claim) holds both.
	active ActiveJob
}

// Set fills in a zero ClaimedJob: its row, its worker (nil when no worker
// knows the kind), when its claim was sent and its reply received. It
// decodes the args with the worker's Decode.
func (cj *ClaimedJob) Set(row *pgqueuetype.JobRow, w *Worker, sent, received time.Time) {
	cj.row, cj.w, cj.sent, cj.received = row, w, sent, received
	if w != nil {
		cj.job, cj.decodeErr = w.Decode(row)
	}
}

// Config is what an Executor is built from.
type Config struct {
	// Active is the registry of running jobs.
	Active *ActiveJobs
	// Results takes each job's result; Outcomes reads a job back after
	// its handler's CompleteTx.
	Results  *completer.Completer
	Outcomes *jobsql.OutcomeReader
	// Pool, Queries and Locks run singleton jobs under their key's lock.
	Pool    *pgxpool.Pool
	Queries *jobsql.Queries
	Locks   *pglock.Locker
	// Jobs ends, with cause ErrStopping, when the client cancels its
	// jobs: a job cancelled then is handed back, not failed. Its values
	// (not its cancellation) reach every job's context.
	Jobs context.Context
	Log  *slog.Logger
	// Observer is told of the results the executor records itself (a
	// handler's CompleteTx).
	Observer completer.Observer
	// Retry is the client's retry policy, for workers without their own.
	Retry RetryPolicy
	// Owner is what a job's context gives back through ActiveJob.Owner:
	// the client, for ClientFromContext.
	Owner any
	// Middleware is the client's work middleware; ErrorHandler may be nil.
	Middleware   []WorkMiddleware
	ErrorHandler ErrorHandler

	// The client's Config fields of the same names.
	JobLease, JobTimeout                  time.Duration
	UnknownKindDelay, SingletonRetryDelay time.Duration
	UnknownKindMaxTries                   int
}

// Executor runs claimed jobs: it gives each a context, a timeout and the
// registry's protection against lost leases, runs the handler (under its
// singleton lock, if any), turns the outcome into a result and hands that
// to the completer. One executor serves every producer of a client.
type Executor struct {
	active    *ActiveJobs
	results   *completer.Completer
	outcomes  *jobsql.OutcomeReader
	singleton *singletonRunner
	// deadlines times out the handlers with one timer.
	deadlines *deadlines
	// stopping ends, with cause ErrStopping, when the client cancels its
	// jobs: a job cancelled then is handed back, not failed.
	stopping context.Context
	// jobParent is the parent of each job's context: Start's values
	// without its cancellation, which the registry passes on instead.
	jobParent context.Context
	log       *slog.Logger
	obs       completer.Observer
	retry     RetryPolicy
	owner     any
	// middleware is Config.Middleware; errorHandler may be nil.
	middleware   []WorkMiddleware
	errorHandler ErrorHandler

	jobLease, jobTimeout                  time.Duration
	unknownKindDelay, singletonRetryDelay time.Duration
	unknownKindMaxTries                   int
}

// New returns the executor cfg describes.
func New(cfg Config) *Executor {
	return &Executor{
		active:    cfg.Active,
		results:   cfg.Results,
		outcomes:  cfg.Outcomes,
		deadlines: newDeadlines(),
		singleton: &singletonRunner{pool: cfg.Pool, q: cfg.Queries, locks: cfg.Locks, log: cfg.Log, jobLease: cfg.JobLease},
		stopping:  cfg.Jobs,
		jobParent: context.WithoutCancel(cfg.Jobs),
		log:       cfg.Log,
		obs:       cfg.Observer,
		retry:     cfg.Retry,
		owner:     cfg.Owner,
		jobLease:  cfg.JobLease, jobTimeout: cfg.JobTimeout,
		unknownKindDelay: cfg.UnknownKindDelay, singletonRetryDelay: cfg.SingletonRetryDelay,
		unknownKindMaxTries: cfg.UnknownKindMaxTries,
		middleware:          cfg.Middleware, errorHandler: cfg.ErrorHandler,
	}
}

// Execute runs one claimed job and hands its result to the completer.
func (e *Executor) Execute(cj *ClaimedJob) {
	row, w := cj.row, cj.w
	now := time.Now()
	if waited := now.Sub(cj.received); waited > e.jobLease/3 {
		// Claimed ahead and kept waiting by slow jobs, its lease unrenewed
		// for longer than a heartbeat interval: hand it back at once,
		// attempt unspent, for a free worker anywhere to take.
		e.log.Warn("pgqueue: claimed job waited too long for a free worker; handed back", "job", row.ID, "kind", row.Kind, "waited", waited)
		e.results.Send(completer.Result{Row: row, Op: completer.OpRelease})
		return
	}
	job := &cj.active
	ctx, cancel := e.jobContext(job)
	defer job.endJob(cancel)
	var timeout time.Duration
	if w != nil {
		timeout = cmp.Or(w.Timeout, e.jobTimeout) // a worker's own, negative for none, wins
	}
	// The handler's context is set up before the job is registered, where
	// a cancellation can reach it.
	handlerCtx, cancelTimeout := e.handlerContext(job, ctx, timeout, now)
	e.active.addIn(job, row, cancel, cj.sent, e.jobLease)
	if w == nil {
		e.active.remove(job)
		e.results.Send(e.unknownKind(row))
		return
	}
	cj.middleware = e.middleware
	if cancelTimeout == nil && timeout > 0 {
		e.deadlines.add(&job.handler)
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
	record := func(r completer.Result) {
		r.Written, release = release, nil
		e.results.Send(r)
	}
	if row.SingletonKey == "" {
		trace, err = runHandler(handlerCtx, cj, LockGrant{})
	} else {
		run := e.singleton.run(ctx, handlerCtx, job.cancelWith, job, cj)
		release = run.release
		if run.busy {
			e.endHandler(job, cancelTimeout)
			e.active.remove(job)
			e.results.Send(completer.Result{Row: row, Op: completer.OpSnooze, Delay: e.singletonRetryDelay})
			return
		}
		err, trace = run.err, run.trace
	}
	e.endHandler(job, cancelTimeout)
	e.active.remove(job)
	lost := job.Finish()

	switch {
	case job.completedInTx.Load() && e.outcomes.Landed(row):
		// The handler's CompleteTx committed: nothing left to write.
		if f := e.obs.ResultRecorded; f != nil {
			f(row, pgqueuetype.OutcomeCompleted)
		}
	case lost:
		// A heartbeat found the claim gone, and warned: a write would be
		// refused. Debug only, so one lost lease is one warning.
		e.log.Debug("pgqueue: job result dropped, lease lost", "job", row.ID, "kind", row.Kind, "fence", row.Fence, "err", err)
	case err == nil:
		record(completer.Result{Row: row, Op: completer.OpComplete})
	case job.cancelRequested.Load():
		// JobCancel asked for it: whatever the handler's error, the job
		// ends cancelled, never retried (sql/finish.sql agrees even when
		// this client never heard of the request).
		msg := err.Error()
		if !errors.Is(err, pgqueuetype.ErrJobCancelled) {
			msg = fmt.Sprintf("%v: %v", pgqueuetype.ErrJobCancelled, err)
		}
		e.log.InfoContext(cj.logContext(ctx), "pgqueue: job cancelled", "job", row.ID, "kind", row.Kind, "queue", row.Queue,
			"attempt", row.Attempt, "requested", true, "err", msg)
		record(completer.Result{Row: row, Op: completer.OpCancel, Err: &msg})
	case e.stopping.Err() != nil:
		// Cancelled because the client is stopping: not the job's fault.
		record(completer.Result{Row: row, Op: completer.OpRelease})
	case isType[*CancelError](err):
		cancelErr, _ := errors.AsType[*CancelError](err)
		msg := cancelErr.Err.Error()
		e.log.InfoContext(cj.logContext(ctx), "pgqueue: job cancelled", "job", row.ID, "kind", row.Kind, "queue", row.Queue,
			"attempt", row.Attempt, "requested", false, "err", msg)
		record(completer.Result{Row: row, Op: completer.OpCancel, Err: &msg})
	case isType[*SnoozeError](err):
		snoozeErr, _ := errors.AsType[*SnoozeError](err)
		record(completer.Result{Row: row, Op: completer.OpSnooze, Delay: snoozeErr.After})
	default:
		r := e.failure(ctx, row, w, err, trace)
		e.logFailure(cj.logContext(ctx), row, err, &r)
		record(r)
	}
}

// jobContext returns job's context: its jobCtx, or, should the context
// package not work as jobContext needs, a context.WithCancelCause and its
// cancel. Both carry the job (withJob).
func (e *Executor) jobContext(job *ActiveJob) (context.Context, context.CancelCauseFunc) {
	values := withJob(e.jobParent, job, e)
	if cancelCtxKey == nil {
		return context.WithCancelCause(values)
	}
	job.jobCtx.parent, job.jobCtx.index = values, -1
	return &job.jobCtx, nil
}

// endJob ends the job's context once its result is handed over: cancel is
// jobContext's.
func (j *ActiveJob) endJob(cancel context.CancelCauseFunc) {
	if cancel != nil {
		cancel(nil)
		return
	}
	j.jobCtx.end(context.Canceled, nil, false)
}

// handlerContext returns the context job's handler runs with: ctx, the
// job's, with timeout (none when not positive). It is the job's handler,
// whose deadline Execute puts on the executor's heap; cancel is nil then.
// ctx must be job's jobCtx then.
// Should the context package not work as jobContext needs, it is a
// context.WithTimeout, and cancel ends it.
func (e *Executor) handlerContext(job *ActiveJob, ctx context.Context, timeout time.Duration, now time.Time) (_ context.Context, cancel context.CancelFunc) {
	if cancelCtxKey != nil {
		h := &job.handler
		h.parent, h.index = ctx, -1
		if timeout > 0 {
			h.deadline = now.Add(timeout)
		}
		return h, nil
	}
	if timeout > 0 {
		return context.WithTimeout(ctx, timeout)
	}
	return ctx, func() {}
}

// endHandler ends the context of job's handler once it returned:
// cancelTimeout is handlerContext's.
func (e *Executor) endHandler(job *ActiveJob, cancelTimeout context.CancelFunc) {
	if cancelTimeout != nil {
		cancelTimeout()
		return
	}
	if !job.handler.deadline.IsZero() {
		e.deadlines.remove(&job.handler)
	}
	job.handler.end(context.Canceled, nil, false)
}

// isType reports whether err's chain holds an E (errors.AsType, as a
// condition: the executor's switch declares no variable for it to escape
// to the heap in every job).
func isType[E error](err error) bool {
	_, ok := errors.AsType[E](err)
	return ok
}

// logContext is the context a job's log records take: the handler's, if
// it ran, else the job's.
func (cj *ClaimedJob) logContext(ctx context.Context) context.Context {
	if cj.handlerCtx != nil {
		return cj.handlerCtx
	}
	return ctx
}

// logFailure logs a failed attempt: Info when the job will be retried (a
// healthy system has some), Warn when it is discarded, Error with the
// stack when the handler panicked.
func (e *Executor) logFailure(ctx context.Context, row *pgqueuetype.JobRow, err error, r *completer.Result) {
	attrs := []slog.Attr{slog.Int64("job", row.ID), slog.String("kind", row.Kind), slog.String("queue", row.Queue),
		slog.Int("attempt", row.Attempt), slog.Int("max_attempts", row.MaxAttempts), slog.Any("err", err)}
	res := r.Outcome()
	if res == pgqueuetype.OutcomeRetried {
		attrs = append(attrs, slog.Duration("retry_in", r.Delay))
	}
	msg, level := "pgqueue: job failed; retrying", slog.LevelInfo
	if res == pgqueuetype.OutcomeDiscarded {
		msg, level = "pgqueue: job failed; discarded", slog.LevelWarn
	}
	if pe, ok := errors.AsType[*pgqueuetype.PanicError](err); ok {
		msg, level = "pgqueue: job panicked", slog.LevelError
		attrs = append(attrs, slog.String("result", string(res)), slog.String("stack", pe.Stack))
	}
	e.log.LogAttrs(ctx, level, msg, attrs...)
}

// failure is the result of a failed attempt: the worker's retry policy
// (or the client's) sets the delay, unless the error handler decides.
func (e *Executor) failure(ctx context.Context, row *pgqueuetype.JobRow, w *Worker, err error, trace string) completer.Result {
	r := completer.Result{Row: row, Op: completer.OpFail}
	msg := err.Error()
	r.Err = &msg
	if trace != "" {
		r.Trace = &trace
	}
	var decision ErrorDecision
	if e.errorHandler != nil {
		decision = e.handleError(ctx, row, err)
	}
	switch {
	case decision.Discard:
		r.Op = completer.OpDiscard
	case decision.RetryDelay != 0:
		r.Delay = max(decision.RetryDelay, 0)
	case w.Retry != nil:
		r.Delay = w.Retry.NextRetry(row.Attempt, err)
	default:
		r.Delay = e.retry.NextRetry(row.Attempt, err)
	}
	return r
}

// handleError asks the error handler about a failed attempt. A panic in
// the handler itself is logged and changes nothing.
func (e *Executor) handleError(ctx context.Context, row *pgqueuetype.JobRow, err error) (d ErrorDecision) {
	defer func() {
		if r := recover(); r != nil {
			e.log.Error("pgqueue: error handler panicked", "job", row.ID, "kind", row.Kind, "panic", r)
			d = ErrorDecision{}
		}
	}()
	if pe, ok := errors.AsType[*pgqueuetype.PanicError](err); ok {
		return e.errorHandler.HandlePanic(ctx, row, pe.Value, pe.Stack)
	}
	return e.errorHandler.HandleError(ctx, row, err)
}

// unknownKind is the result of a job whose kind has no worker here: back
// to wait for one, its attempt given back, or discarded once this is its
// UnknownKindMaxTries-th such try. The tries are counted in the claimed
// row's errors, so every client and restart counts the same ones.
func (e *Executor) unknownKind(row *pgqueuetype.JobRow) completer.Result {
	tries := 1
	for _, ae := range row.Errors {
		if ae.UnknownKind {
			tries++
		}
	}
	var err error
	r := completer.Result{Row: row, Op: completer.OpUnknownKind, Delay: e.unknownKindDelay}
	if e.unknownKindMaxTries > 0 && tries >= e.unknownKindMaxTries {
		r.Op = completer.OpDiscard
		err = fmt.Errorf("%w %q after %d tries; discarded", pgqueuetype.ErrUnknownKind, row.Kind, tries)
	} else {
		err = fmt.Errorf("%w %q (try %d); waiting %s for a worker that knows it", pgqueuetype.ErrUnknownKind, row.Kind, tries, e.unknownKindDelay)
	}
	e.log.Warn("pgqueue: job kind has no worker", "job", row.ID, "kind", row.Kind, "err", err)
	note := err.Error()
	r.Err = &note
	return r
}

// runHandler runs the work middleware and the handler. A panic in either
// becomes a *PanicError, whose stack is returned as trace.
func runHandler(ctx context.Context, cj *ClaimedJob, grant LockGrant) (trace string, err error) {
	defer func() {
		if r := recover(); r != nil { // in a middleware
			err = newPanicError(r)
		}
		if pe, ok := errors.AsType[*pgqueuetype.PanicError](err); ok {
			trace = pe.Stack
		}
	}()
	if len(cj.middleware) == 0 && len(cj.w.Middleware) == 0 {
		return "", callHandler(ctx, cj, grant)
	}
	handler := func(ctx context.Context) error { return callHandler(ctx, cj, grant) }
	return "", runWork(ctx, cj.row, handler, cj.middleware, cj.w.Middleware)
}

// callHandler calls the job's handler, turning a panic into a *PanicError.
func callHandler(ctx context.Context, cj *ClaimedJob, grant LockGrant) (err error) {
	if cj.decodeErr != nil {
		return cj.decodeErr
	}
	defer func() {
		if r := recover(); r != nil {
			err = newPanicError(r)
		}
	}()
	cj.handlerCtx = ctx
	return cj.w.Work(ctx, cj.job, grant)
}
