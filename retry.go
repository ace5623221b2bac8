package pgqueue

import (
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
