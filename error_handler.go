package pgqueue

import (
	"context"
	"runtime/debug"
	"time"
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

// newPanicError is called from a deferred recover.
func newPanicError(v any) *PanicError {
	return &PanicError{Value: v, Stack: string(debug.Stack())}
}
