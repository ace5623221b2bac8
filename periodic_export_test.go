package pgqueue

import (
	"context"
	"time"

	"github.com/pgqueue/pgqueue/internal/maintenance"
)

// PeriodicRun is one run PlanPeriodic decided on.
type PeriodicRun = maintenance.PeriodicRun

// PlanPeriodic runs maintenance.PlanPeriodic: what is due for a job of
// schedule s and opts whose row records last and startTerm, at the
// database time now in leader term term.
func PlanPeriodic(s PeriodicSchedule, opts PeriodicJobOpts, last time.Time, startTerm *int64, now time.Time, term int64, missedAfter time.Duration, limit int) (runs []PeriodicRun, newLast time.Time, wait time.Duration) {
	job := &maintenance.PeriodicJob{Schedule: s, RunOnStart: opts.RunOnStart, CatchUp: opts.Missed == MissedCatchUp, MissedAfter: missedAfter}
	plan := maintenance.PlanPeriodic(job, maintenance.PeriodicState{Last: last, StartTerm: startTerm}, now, term, limit)
	return plan.Runs, plan.Last, plan.Wait
}

// PeriodicPass runs one pass of c's periodic task as the leader of term
// would, whether or not c leads, and returns how long it would sleep.
func PeriodicPass(ctx context.Context, c *Client, term int64) time.Duration {
	return c.periodicEnqueuer(ctx).Pass(ctx, term)
}
