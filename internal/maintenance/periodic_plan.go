package maintenance

import (
	"fmt"
	"time"
)

// Schedule says when a periodic job is due: the method set of the root's
// PeriodicSchedule. Next returns the first instant strictly after t, or the
// zero Time when there is none.
type Schedule interface {
	Next(t time.Time) time.Time
}

// The runs of a periodic job, as recorded in the job's Meta.
const (
	periodicRunScheduled = "scheduled"
	periodicRunCatchUp   = "catch_up"
	periodicRunStart     = "start"
)

// PeriodicRun is one run of a periodic job to enqueue.
type PeriodicRun struct {
	// Instant is the schedule's instant, or the database time of a run on
	// start.
	Instant time.Time
	// Kind is "scheduled", "catch_up" or "start".
	Kind string
}

// PeriodicState is a job's row of periodic_jobs.
type PeriodicState struct {
	// Last is the instant up to which the schedule is done.
	Last time.Time
	// StartTerm is the last term that ran the job on start, if any.
	StartTerm *int64
}

// startedBefore reports whether no term up to term ran the job on start.
func (s PeriodicState) startedBefore(term int64) bool {
	return s.StartTerm == nil || *s.StartTerm < term
}

// PeriodicPlan is what one transaction does for a job.
type PeriodicPlan struct {
	Runs []PeriodicRun
	// Last is the instant to record: the last run's, or that of the last
	// instant skipped.
	Last time.Time
	// Started says Runs hold the run on start of the term.
	Started bool
	// Skipped are the first and last missed instants, if any.
	Skipped struct{ First, Last time.Time }
	// Wait is how long from now until the next instant after Last; zero
	// when it is due already (the runs were limited).
	Wait time.Duration
}

// PlanPeriodic decides, from a job's recorded state and the database's
// time now, what is due: the run on start if term has not made it; the
// instants after st.Last up to now, each once; instants more than
// job.MissedAfter before now are missed (skipped, or the latest of them
// run once when job.CatchUp). At most limit runs.
func PlanPeriodic(job *PeriodicJob, st PeriodicState, now time.Time, term int64, limit int) PeriodicPlan {
	s := job.Schedule
	plan := PeriodicPlan{Last: st.Last}
	if job.RunOnStart && st.startedBefore(term) {
		plan.Runs = append(plan.Runs, PeriodicRun{Instant: now, Kind: periodicRunStart})
		plan.Started = true
	}
	next := nextInstant(s, st.Last)
	if cut := now.Add(-job.MissedAfter); !next.IsZero() && next.Before(cut) {
		latest := latestBefore(s, st.Last, cut).Truncate(time.Microsecond)
		if latest.After(st.Last) {
			plan.Skipped.First, plan.Skipped.Last = next, latest
			if job.CatchUp {
				plan.Runs = append(plan.Runs, PeriodicRun{Instant: latest, Kind: periodicRunCatchUp})
			}
			plan.Last = latest
			next = nextInstant(s, latest)
		}
	}
	for !next.IsZero() && !next.After(now) && len(plan.Runs) < limit {
		plan.Runs = append(plan.Runs, PeriodicRun{Instant: next, Kind: periodicRunScheduled})
		plan.Last = next
		next = nextInstant(s, next)
	}
	switch {
	case next.IsZero():
		plan.Wait = periodicMaxSleep
	case !next.After(now):
		plan.Wait = 0
	default:
		plan.Wait = next.Sub(now)
	}
	return plan
}

// nextInstant returns s's first instant after t, to the microsecond the
// database keeps, or the zero Time when there is none.
func nextInstant(s Schedule, t time.Time) time.Time {
	next := s.Next(t)
	if next.IsZero() {
		return next
	}
	next = next.Truncate(time.Microsecond).UTC()
	if !next.After(t) {
		return time.Time{} // a schedule that does not move on
	}
	return next
}

// latestBefore returns s's latest instant before cut, given that s has one
// in (after, cut). It searches the time between after and cut by halves,
// about sixty calls of Next however many instants there are: after days
// of downtime an every-second job has hundreds of thousands.
func latestBefore(s Schedule, after, cut time.Time) time.Time {
	// Invariant: s.Next(lo) < cut <= s.Next(hi).
	lo, hi := after, cut
	for hi.Sub(lo) > time.Nanosecond {
		mid := lo.Add(hi.Sub(lo) / 2)
		if next := s.Next(mid); !next.IsZero() && next.Before(cut) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return s.Next(lo)
}

// describeSchedule is a schedule's text for operators: its String when it
// has one, else its Go type.
func describeSchedule(s Schedule) string {
	if str, ok := s.(fmt.Stringer); ok {
		return str.String()
	}
	return fmt.Sprintf("%T", s)
}
