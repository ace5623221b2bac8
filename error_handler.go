package pgqueue

import (
	"context"
	"time"

	"github.com/pgqueue/pgqueue/internal/executor"
)

// ErrorHandler is told of every failed attempt, as Config.ErrorHandler:
// HandleError when the work (handler and middleware) returned an error,
// HandlePanic when it panicked. It is not called for JobSnooze,
// JobCancel, nor for an attempt ended by Stop or by a lost lease. It runs
// on the job's goroutine before the result is recorded, so it should be
// quick.
//
// ctx is the job's context (ClientFromContext works on it), without the
// handler's timeout and the middleware's values. The returned decision may
// be nil: the job is then retried by the retry policy, or discarded once
// its attempts are used up.
type ErrorHandler interface {
	HandleError(ctx context.Context, job *JobRow, err error) *ErrorDecision
	HandlePanic(ctx context.Context, job *JobRow, value any, stack string) *ErrorDecision
}

// ErrorDecision is what an ErrorHandler decides for a failed attempt. The
// zero value changes nothing.
type ErrorDecision struct {
	// Discard ends the job now as discarded, whatever attempts it has
	// left (an error no retry can fix).
	Discard bool
	// RetryDelay, when not zero, replaces the retry policy's delay before
	// the next attempt; negative means at once. It does not grant an
	// attempt beyond MaxAttempts.
	RetryDelay time.Duration
}

// errorHandler adapts an ErrorHandler to the executor's, whose decision
// is a value: a nil decision is the zero one.
type errorHandler struct{ h ErrorHandler }

// HandleError asks the client's handler about an error.
func (a errorHandler) HandleError(ctx context.Context, job *JobRow, err error) executor.ErrorDecision {
	return a.h.HandleError(ctx, job, err).decision()
}

// HandlePanic asks the client's handler about a panic.
func (a errorHandler) HandlePanic(ctx context.Context, job *JobRow, value any, stack string) executor.ErrorDecision {
	return a.h.HandlePanic(ctx, job, value, stack).decision()
}

// decision is d as the executor takes it; d may be nil.
func (d *ErrorDecision) decision() executor.ErrorDecision {
	if d == nil {
		return executor.ErrorDecision{}
	}
	return executor.ErrorDecision{Discard: d.Discard, RetryDelay: d.RetryDelay}
}
