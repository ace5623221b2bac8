package producer

// An internal test: claimAhead is unexported, and its estimate is pure
// arithmetic on the times it is given.

import (
	"testing"
	"time"
)

// steady feeds a claimAhead rounds of claims sent every interval, after
// the last one it saw, each seeing finished jobs finish since the one
// before and answered after about latency (measured by the real clock,
// so a little more).
func steady(a *claimAhead, rounds, finished int, interval, latency time.Duration) {
	next := a.lastSent.Add(interval)
	if a.lastSent.IsZero() {
		next = time.Now()
	}
	for range rounds {
		a.finished += finished
		a.sending(next)
		a.returned(time.Now().Add(-latency))
		next = next.Add(interval)
	}
}

func TestClaimAhead(t *testing.T) {
	t.Parallel()

	t.Run("NothingAheadBeforeAnyMeasure", func(t *testing.T) {
		t.Parallel()
		var a claimAhead
		if n := a.jobs(0, 1000); n != 0 {
			t.Fatalf("jobs = %d, want 0", n)
		}
		// The first claim only starts the clock: no rate yet.
		a.finished = 500
		a.sending(time.Now())
		if a.rate != 0 || a.finished != 0 {
			t.Fatalf("rate %v finished %d after the first claim, want 0 and 0", a.rate, a.finished)
		}
	})

	t.Run("ShortJobsRateTimesLatency", func(t *testing.T) {
		t.Parallel()
		// 1,000 jobs per 100 ms is 10,000/s; a claim takes 50 ms: about 500
		// jobs finish while one is in flight.
		var a claimAhead
		steady(&a, 60, 1000, 100*time.Millisecond, 50*time.Millisecond)
		if a.rate < 9_900 || a.rate > 10_000 {
			t.Fatalf("rate %.0f/s, want about 10000/s", a.rate)
		}
		if n := a.jobs(0, 10_000); n < 490 || n > 600 {
			t.Fatalf("jobs = %d, want about 500", n)
		}
	})

	t.Run("CappedAtLimit", func(t *testing.T) {
		t.Parallel()
		var a claimAhead
		steady(&a, 60, 1000, 100*time.Millisecond, 50*time.Millisecond)
		if n := a.jobs(0, 8); n != 8 {
			t.Fatalf("jobs = %d, want the limit 8", n)
		}
	})

	t.Run("LongJobsNothingAhead", func(t *testing.T) {
		t.Parallel()
		// One job finishes every ten seconds; a claim takes 5 ms.
		var a claimAhead
		steady(&a, 60, 1, 10*time.Second, 5*time.Millisecond)
		if n := a.jobs(0, 1000); n != 0 {
			t.Fatalf("jobs = %d, want 0 for long jobs", n)
		}
	})

	t.Run("ClaimsSentTogetherMeasureAcrossBoth", func(t *testing.T) {
		t.Parallel()
		var a claimAhead
		t0 := time.Now()
		a.sending(t0)
		a.finished = 100
		// A second claim under a millisecond later must not divide 100
		// jobs by a few microseconds.
		a.sending(t0.Add(500 * time.Microsecond))
		if a.rate != 0 || a.finished != 100 || !a.lastSent.Equal(t0) {
			t.Fatalf("rate %v finished %d lastSent %v: the pair was measured apart", a.rate, a.finished, a.lastSent.Sub(t0))
		}
		a.finished += 100
		a.sending(t0.Add(100 * time.Millisecond))
		// 200 jobs over 100 ms is 2,000/s, a quarter of it after one sample.
		if want := aheadSmoothing * 2000; a.rate < want-1 || a.rate > want+1 {
			t.Fatalf("rate %.1f/s after one sample, want %.1f", a.rate, want)
		}
	})

	t.Run("RateFollowsASlowdown", func(t *testing.T) {
		t.Parallel()
		var a claimAhead
		steady(&a, 60, 1000, 100*time.Millisecond, 50*time.Millisecond)
		before := a.jobs(0, 10_000)
		// Jobs now take a hundred times longer.
		steady(&a, 60, 10, 100*time.Millisecond, 50*time.Millisecond)
		if after := a.jobs(0, 10_000); after >= before/50 {
			t.Fatalf("jobs %d after the slowdown, %d before: estimate did not follow", after, before)
		}
	})
}
