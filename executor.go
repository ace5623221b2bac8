package pgqueue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/pgqueue/pgqueue/internal/jobsql"
)

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
	// middleware is the client's work middleware, outside the worker's.
	middleware []WorkMiddleware
	// handlerCtx is the context the handler got, with what middleware
	// added (a span): the job's log records use it, so trace ids reach
	// them. Nil when no handler ran.
	handlerCtx context.Context
	// active is the job's entry in the registry of running jobs, kept
	// here so that one allocation (the producer's, per claim) holds both.
	active activeJob
}

// executor runs claimed jobs: it gives each a context, a timeout and the
// registry's protection against lost leases, runs the handler (under its
// singleton lock, if any), turns the outcome into a result and hands that
// to the completer. One executor serves every producer of a client.
type executor struct {
	active    *activeJobs
	results   *completer
	outcomes  *jobsql.OutcomeReader
	singleton *singletonRunner
	// stopping ends, with cause ErrStopping, when the client cancels its
	// jobs: a job cancelled then is handed back, not failed.
	stopping context.Context
	// jobParent is the parent of each job's context: Start's values
	// without its cancellation, which the registry passes on instead.
	jobParent context.Context
	log       *slog.Logger
	obs       *Observer
	retry     RetryPolicy
	// jobContext adds to a job's context what handlers read back from it
	// (ClientFromContext, RecordOutput).
	jobContext func(ctx context.Context, j *activeJob) context.Context
	// middleware is Config.WorkMiddleware; errorHandler may be nil.
	middleware   []WorkMiddleware
	errorHandler ErrorHandler

	jobLease, jobTimeout                  time.Duration
	unknownKindDelay, singletonRetryDelay time.Duration
	unknownKindMaxTries                   int
}

// execute runs one claimed job and hands its result to the completer.
func (e *executor) execute(cj *claimedJob) {
	row, w := cj.row, cj.w
	if waited := time.Since(cj.received); waited > e.jobLease/3 {
		// Claimed ahead and kept waiting by slow jobs, its lease unrenewed
		// for longer than a heartbeat interval: hand it back at once,
		// attempt unspent, for a free worker anywhere to take.
		e.log.Warn("pgqueue: claimed job waited too long for a free worker; handed back", "job", row.ID, "kind", row.Kind, "waited", waited)
		e.results.send(result{row: row, op: opRelease})
		return
	}
	ctx, cancel := context.WithCancelCause(e.jobParent)
	defer cancel(nil)
	job := e.active.addIn(&cj.active, row, cancel, cj.sent, e.jobLease)
	ctx = e.jobContext(ctx, job)
	if w == nil {
		e.active.remove(job)
		e.results.send(e.unknownKind(row))
		return
	}
	cj.middleware = e.middleware
	timeout := cmp.Or(w.timeout, e.jobTimeout) // a worker's own, negative for none, wins
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
		e.results.send(r)
	}
	if row.SingletonKey == "" {
		trace, err = runHandler(handlerCtx, cj, lockGrant{})
	} else {
		run := e.singleton.run(ctx, handlerCtx, cancel, job, cj)
		release = run.release
		if run.busy {
			cancelTimeout()
			e.active.remove(job)
			e.results.send(result{row: row, op: opSnooze, delay: e.singletonRetryDelay})
			return
		}
		err, trace = run.err, run.trace
	}
	cancelTimeout()
	e.active.remove(job)

	switch {
	case job.completedInTx.Load() && e.outcomes.Landed(row):
		// The handler's CompleteTx committed: nothing left to write.
		if f := e.obs.ResultRecorded; f != nil {
			f(row, OutcomeCompleted)
		}
	case job.lost.Load():
		// A heartbeat found the claim gone, and warned: a write would be
		// refused. Debug only, so one lost lease is one warning.
		e.log.Debug("pgqueue: job result dropped, lease lost", "job", row.ID, "kind", row.Kind, "fence", row.Fence, "err", err)
	case err == nil:
		record(result{row: row, op: opComplete})
	case job.cancelRequested.Load():
		// JobCancel asked for it: whatever the handler's error, the job
		// ends cancelled, never retried (sql/finish.sql agrees even when
		// this client never heard of the request).
		msg := err.Error()
		if !errors.Is(err, ErrJobCancelled) {
			msg = fmt.Sprintf("%v: %v", ErrJobCancelled, err)
		}
		e.log.InfoContext(cj.logContext(ctx), "pgqueue: job cancelled", "job", row.ID, "kind", row.Kind, "queue", row.Queue,
			"attempt", row.Attempt, "requested", true, "err", msg)
		record(result{row: row, op: opCancel, err: &msg})
	case e.stopping.Err() != nil:
		// Cancelled because the client is stopping: not the job's fault.
		record(result{row: row, op: opRelease})
	case isType[*jobCancelError](err):
		cancelErr, _ := errors.AsType[*jobCancelError](err)
		msg := cancelErr.err.Error()
		e.log.InfoContext(cj.logContext(ctx), "pgqueue: job cancelled", "job", row.ID, "kind", row.Kind, "queue", row.Queue,
			"attempt", row.Attempt, "requested", false, "err", msg)
		record(result{row: row, op: opCancel, err: &msg})
	case isType[*jobSnoozeError](err):
		snoozeErr, _ := errors.AsType[*jobSnoozeError](err)
		record(result{row: row, op: opSnooze, delay: snoozeErr.after})
	default:
		r := e.failure(ctx, row, w, err, trace)
		e.logFailure(cj.logContext(ctx), row, err, &r)
		record(r)
	}
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
func (cj *claimedJob) logContext(ctx context.Context) context.Context {
	if cj.handlerCtx != nil {
		return cj.handlerCtx
	}
	return ctx
}

// logFailure logs a failed attempt: Info when the job will be retried (a
// healthy system has some), Warn when it is discarded, Error with the
// stack when the handler panicked.
func (e *executor) logFailure(ctx context.Context, row *JobRow, err error, r *result) {
	attrs := []slog.Attr{slog.Int64("job", row.ID), slog.String("kind", row.Kind), slog.String("queue", row.Queue),
		slog.Int("attempt", row.Attempt), slog.Int("max_attempts", row.MaxAttempts), slog.Any("err", err)}
	res := resultOf(r)
	if res == OutcomeRetried {
		attrs = append(attrs, slog.Duration("retry_in", r.delay))
	}
	msg, level := "pgqueue: job failed; retrying", slog.LevelInfo
	if res == OutcomeDiscarded {
		msg, level = "pgqueue: job failed; discarded", slog.LevelWarn
	}
	if pe, ok := errors.AsType[*PanicError](err); ok {
		msg, level = "pgqueue: job panicked", slog.LevelError
		attrs = append(attrs, slog.String("result", string(res)), slog.String("stack", pe.Stack))
	}
	e.log.LogAttrs(ctx, level, msg, attrs...)
}

// failure is the result of a failed attempt: the worker's retry policy
// (or the client's) sets the delay, unless the error handler decides.
func (e *executor) failure(ctx context.Context, row *JobRow, w *registeredWorker, err error, trace string) result {
	r := result{row: row, op: opFail}
	msg := err.Error()
	r.err = &msg
	if trace != "" {
		r.trace = &trace
	}
	var decision *ErrorDecision
	if e.errorHandler != nil {
		decision = e.handleError(ctx, row, err)
	}
	switch {
	case decision != nil && decision.Discard:
		r.op = opDiscard
	case decision != nil && decision.RetryDelay != 0:
		r.delay = max(decision.RetryDelay, 0)
	case w.retry != nil:
		r.delay = w.retry.NextRetry(row.Attempt, err)
	default:
		r.delay = e.retry.NextRetry(row.Attempt, err)
	}
	return r
}

// handleError asks the error handler about a failed attempt. A panic in
// the handler itself is logged and changes nothing.
func (e *executor) handleError(ctx context.Context, row *JobRow, err error) (d *ErrorDecision) {
	defer func() {
		if r := recover(); r != nil {
			e.log.Error("pgqueue: error handler panicked", "job", row.ID, "kind", row.Kind, "panic", r)
			d = nil
		}
	}()
	if pe, ok := errors.AsType[*PanicError](err); ok {
		return e.errorHandler.HandlePanic(ctx, row, pe.Value, pe.Stack)
	}
	return e.errorHandler.HandleError(ctx, row, err)
}

// unknownKind is the result of a job whose kind has no worker here: back
// to wait for one, its attempt given back, or discarded once this is its
// UnknownKindMaxTries-th such try. The tries are counted in the claimed
// row's errors, so every client and restart counts the same ones.
func (e *executor) unknownKind(row *JobRow) result {
	tries := 1
	for _, ae := range row.Errors {
		if ae.UnknownKind {
			tries++
		}
	}
	var err error
	r := result{row: row, op: opUnknownKind, delay: e.unknownKindDelay}
	if e.unknownKindMaxTries > 0 && tries >= e.unknownKindMaxTries {
		r.op = opDiscard
		err = fmt.Errorf("%w %q after %d tries; discarded", ErrUnknownKind, row.Kind, tries)
	} else {
		err = fmt.Errorf("%w %q (try %d); waiting %s for a worker that knows it", ErrUnknownKind, row.Kind, tries, e.unknownKindDelay)
	}
	e.log.Warn("pgqueue: job kind has no worker", "job", row.ID, "kind", row.Kind, "err", err)
	note := err.Error()
	r.err = &note
	return r
}

// runHandler runs the work middleware and the handler. A panic in either
// becomes a *PanicError, whose stack is returned as trace.
func runHandler(ctx context.Context, cj *claimedJob, grant lockGrant) (trace string, err error) {
	defer func() {
		if r := recover(); r != nil { // in a middleware
			err = newPanicError(r)
		}
		if pe, ok := errors.AsType[*PanicError](err); ok {
			trace = pe.Stack
		}
	}()
	if len(cj.middleware) == 0 && len(cj.w.middleware) == 0 {
		return "", callHandler(ctx, cj, grant)
	}
	handler := func(ctx context.Context) error { return callHandler(ctx, cj, grant) }
	return "", runWork(ctx, cj.row, handler, cj.middleware, cj.w.middleware)
}

// callHandler calls the job's handler, turning a panic into a *PanicError.
func callHandler(ctx context.Context, cj *claimedJob, grant lockGrant) (err error) {
	if cj.decodeErr != nil {
		return cj.decodeErr
	}
	defer func() {
		if r := recover(); r != nil {
			err = newPanicError(r)
		}
	}()
	cj.handlerCtx = ctx
	return cj.w.work(ctx, cj.job, grant)
}
