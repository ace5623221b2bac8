package executor

import (
	"context"
	"runtime/debug"
	"time"

	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// ErrorHandler mirrors pgqueue.ErrorHandler, its decision returned by
// value: the client adapts its handler to it once, at Start.
type ErrorHandler interface {
	HandleError(ctx context.Context, job *pgqueuetype.JobRow, err error) ErrorDecision
	HandlePanic(ctx context.Context, job *pgqueuetype.JobRow, value any, stack string) ErrorDecision
}

// ErrorDecision mirrors pgqueue.ErrorDecision; the zero value (what a nil
// decision becomes) changes nothing.
type ErrorDecision struct {
	// Discard ends the job now as discarded.
	Discard bool
	// RetryDelay, when not zero, replaces the retry policy's delay;
	// negative means at once.
	RetryDelay time.Duration
}

// newPanicError is called from a deferred recover.
func newPanicError(v any) *pgqueuetype.PanicError {
	return &pgqueuetype.PanicError{Value: v, Stack: string(debug.Stack())}
}
