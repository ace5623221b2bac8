package pgqueue

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
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

// DefaultRetryPolicy waits 1s, 2s, 4s, ... up to an hour, ±20%.
var DefaultRetryPolicy RetryPolicy = ExponentialBackoff{}

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

// jobCancelError ends a job without further attempts.
type jobCancelError struct{ err error }

func (e *jobCancelError) Error() string { return "job cancelled: " + e.err.Error() }
func (e *jobCancelError) Unwrap() error { return e.err }

// JobCancel, returned by a handler, ends the job as cancelled with no
// further attempts; err's text is kept in the job's errors. A nil err
// records "cancelled".
func JobCancel(err error) error {
	if err == nil {
		err = errors.New("cancelled")
	}
	return &jobCancelError{err: err}
}

// jobSnoozeError asks for another run later without spending an attempt.
type jobSnoozeError struct{ after time.Duration }

func (e *jobSnoozeError) Error() string { return fmt.Sprintf("job snoozed for %s", e.after) }

// JobSnooze, returned by a handler, puts the job back to run again after d
// without spending an attempt. d ≤ 0 makes it available at once.
func JobSnooze(d time.Duration) error {
	return &jobSnoozeError{after: d}
}
