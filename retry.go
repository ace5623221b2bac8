package pgqueue

import (
	"context"
	"math"
	"math/rand/v2"
	"time"

	"github.com/pgqueue/pgqueue/internal/executor"
)

// RetryPolicy decides how long a failed job waits before its next attempt.
// attempt is the attempt that just failed, starting at 1. The policy is not
// asked once the job's attempts are used up: it is discarded.
type RetryPolicy interface {
	NextRetry(attempt int, err error) time.Duration
}

// RetryPolicyFunc adapts a function to RetryPolicy.
type RetryPolicyFunc func(attempt int, err error) time.Duration

// NextRetry calls f.
func (f RetryPolicyFunc) NextRetry(attempt int, err error) time.Duration { return f(attempt, err) }

// ExponentialBackoff waits Base·2^(attempt-1), capped at Max, then moves the
// result by a random amount of up to ±Jitter of itself so that jobs failing
// together do not retry together.
type ExponentialBackoff struct {
	// Base is the first delay. Default 1s.
	Base time.Duration
	// Max caps the delay before jitter. Default 1h.
	Max time.Duration
	// Jitter is the spread, as a fraction in [0, 1]. Default 0.2 (±20%).
	// Use a negative value for none.
	Jitter float64
}

// NextRetry implements RetryPolicy.
func (b ExponentialBackoff) NextRetry(attempt int, _ error) time.Duration {
	base, maxDelay, jitter := b.Base, b.Max, b.Jitter
	if base <= 0 {
		base = time.Second
	}
	if maxDelay <= 0 {
		maxDelay = time.Hour
	}
	switch {
	case jitter == 0:
		jitter = 0.2
	case jitter < 0:
		jitter = 0
	case jitter > 1:
		jitter = 1
	}
	attempt = max(attempt, 1)
	d := float64(base) * math.Pow(2, float64(attempt-1))
	d = min(d, float64(maxDelay))
	d += d * jitter * (2*rand.Float64() - 1)
	return time.Duration(d)
}

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
