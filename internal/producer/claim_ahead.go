package producer

import "time"

// claimAhead estimates how many jobs a producer's workers will finish over
// a span of time: the rate jobs finished at between recent claims, times
// the span. Claiming that many beyond the free slots keeps the slots busy
// while the next claim is in flight, and lets each claim be a large batch
// however few workers the process has. Short jobs are where this pays;
// for long ones the estimate is near zero, so a client never holds jobs
// that another client's idle workers could have started much sooner.
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

// jobs is the number to claim ahead: those expected to finish during
// horizon, or during one claim's round trip if that is longer; at most
// limit.
func (a *claimAhead) jobs(horizon time.Duration, limit int) int {
	return min(int(a.rate*max(a.latency, horizon.Seconds())), limit)
}

// claimAheadMost is the most jobs a producer holds ahead: aheadPerWorker
// for each of its workers, and never more than claimAheadCap. The bound
// per worker keeps a process with few workers from taking a small backlog
// whole while other processes' workers sit idle.
func claimAheadMost(maxWorkers int) int {
	return min(aheadPerWorker*maxWorkers, claimAheadCap)
}

const (
	aheadPerWorker = 20
	claimAheadCap  = 1000
)

// claimHorizon is the span a producer claims ahead for: Config.ClaimAheadWindow,
// at most a sixth of the lease, so that jobs held in steady work never
// wait the JobLease/3 after which they are handed back.
func claimHorizon(ahead, jobLease time.Duration) time.Duration {
	return min(ahead, jobLease/6)
}
