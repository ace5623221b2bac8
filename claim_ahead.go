package pgqueue

import "time"

// claimAhead estimates how many running jobs will finish during one claim
// round trip: the rate jobs finished at between recent claims, times the
// recent claim latency. Claiming that many beyond the free slots keeps the
// slots busy while the next claim is in flight, instead of leaving them
// idle for a round trip per batch. Short jobs are where this pays; for
// long ones the estimate is near zero, so a client never holds jobs that
// another client's idle workers could have started much sooner.
type claimAhead struct {
	finished int       // jobs finished since the last claim was sent
	lastSent time.Time // when the last claim was sent
	rate     float64   // jobs finished per second, moving average
	latency  float64   // seconds per claim, moving average
}

const aheadSmoothing = 0.25

func (a *claimAhead) sending(now time.Time) {
	if !a.lastSent.IsZero() {
		d := now.Sub(a.lastSent)
		if d < time.Millisecond {
			return // two claims sent together: measure across both
		}
		a.rate += aheadSmoothing * (float64(a.finished)/d.Seconds() - a.rate)
	}
	a.lastSent, a.finished = now, 0
}

func (a *claimAhead) returned(sent time.Time) {
	a.latency += aheadSmoothing * (time.Since(sent).Seconds() - a.latency)
}

// jobs is the number to claim ahead, at most limit.
func (a *claimAhead) jobs(limit int) int {
	return min(int(a.rate*a.latency), limit)
}
