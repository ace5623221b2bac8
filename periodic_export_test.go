package pgqueue

import (
	"context"
	"time"
)

// PeriodicRun is one run planPeriodic decided on.
type PeriodicRun struct {
	Instant time.Time
	Kind    string
}

// PlanPeriodic runs planPeriodic: what is due for a job of schedule s and
// opts whose row records last and startTerm, at the database time now in
// leader term term.
func PlanPeriodic(s PeriodicSchedule, opts PeriodicJobOpts, last time.Time, startTerm *int64, now time.Time, term int64, missedAfter time.Duration, limit int) (runs []PeriodicRun, newLast time.Time, wait time.Duration) {
	plan := planPeriodic(s, opts, periodicState{last: last, startTerm: startTerm}, now, term, missedAfter, limit)
	for _, r := range plan.runs {
		runs = append(runs, PeriodicRun{Instant: r.instant, Kind: r.kind})
	}
	return runs, plan.last, plan.wait
}

// PeriodicPass runs one pass of c's periodic task as the leader of term
// would, whether or not c leads, and returns how long it would sleep.
func PeriodicPass(ctx context.Context, c *Client, term int64) time.Duration {
	p := &periodicEnqueuer{pool: c.pool, q: c.q, log: c.log, base: ctx, jobs: c.periodic,
		insert: c.enqueuePeriodic, wake: c.wake, leaderTTL: c.config.LeaderTTL}
	return p.pass(ctx, term)
}
