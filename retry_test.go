package pgqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// TestRetryPolicy checks that a failed job waits the delay its policy asks.
func TestRetryPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("RetryWaitsForBackoff", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a retry waiting for its backoff")
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			return errors.New("later")
		}, nil))
		b := startClient(t, pool, ws, &pgqueue.Config{RetryPolicy: pgqueue.RetryPolicyFunc(func(attempt int, err error) time.Duration { return time.Hour })})
		row, err := b.client.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		s := waitState(t, pool, row.ID, "scheduled")
		if s.attempt != 1 || s.runAt.Sub(*s.attempts) < 59*time.Minute {
			t.Fatalf("attempt %d, run_at %s after attempt at %s", s.attempt, s.runAt, *s.attempts)
		}
	})
}

// TestExponentialBackoff checks the default policy's delays: doubling
// from Base, capped at Max, spread by Jitter.
func TestExponentialBackoff(t *testing.T) {
	t.Parallel()

	t.Run("DoublesUpToMax", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			policy  pgqueue.ExponentialBackoff
			attempt int
			want    time.Duration
		}{
			{pgqueue.ExponentialBackoff{Jitter: -1}, 1, time.Second},
			{pgqueue.ExponentialBackoff{Jitter: -1}, 2, 2 * time.Second},
			{pgqueue.ExponentialBackoff{Jitter: -1}, 3, 4 * time.Second},
			{pgqueue.ExponentialBackoff{Jitter: -1}, 0, time.Second}, // below 1 counts as 1
			{pgqueue.ExponentialBackoff{Jitter: -1}, 13, time.Hour},  // 4096s capped at the default Max
			{pgqueue.ExponentialBackoff{Jitter: -1}, 1000, time.Hour},
			{pgqueue.ExponentialBackoff{Base: 100 * time.Millisecond, Max: time.Second, Jitter: -1}, 4, 800 * time.Millisecond},
			{pgqueue.ExponentialBackoff{Base: 100 * time.Millisecond, Max: time.Second, Jitter: -1}, 5, time.Second},
		} {
			if got := tc.policy.NextRetry(tc.attempt, nil); got != tc.want {
				t.Errorf("%+v attempt %d: %s, want %s", tc.policy, tc.attempt, got, tc.want)
			}
		}
	})

	t.Run("JitterSpreadsDelays", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			jitter   float64
			min, max time.Duration
		}{
			{0, 3200 * time.Millisecond, 4800 * time.Millisecond}, // default ±20% of 4s
			{0.5, 2 * time.Second, 6 * time.Second},
			{3, 0, 8 * time.Second}, // above 1 counts as 1
		} {
			p := pgqueue.ExponentialBackoff{Jitter: tc.jitter}
			seen := map[time.Duration]bool{}
			for range 200 {
				d := p.NextRetry(3, errors.New("x"))
				if d < tc.min || d > tc.max {
					t.Fatalf("jitter %v: %s outside [%s, %s]", tc.jitter, d, tc.min, tc.max)
				}
				seen[d] = true
			}
			if len(seen) < 100 {
				t.Errorf("jitter %v: %d distinct delays in 200, want them spread", tc.jitter, len(seen))
			}
		}
	})
}
