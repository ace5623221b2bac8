package pgqueue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/jobsql"
)

// periodicEnqueuer enqueues the due runs of the client's periodic jobs. It
// runs on the maintenance leader. It keeps nothing between passes: the
// table periodic_jobs says, per job, up to which instant the schedule is
// done, and each due job is enqueued in one transaction that locks its
// row, decides from the database's now() what is due, inserts the runs and
// moves the row on (sql/periodic_*.sql). So two leaders at once (one
// paused past its term) can never enqueue an instant twice.
type periodicEnqueuer struct {
	pool *pgxpool.Pool
	q    *jobsql.Queries
	log  *slog.Logger
	// base is the parent of its writes, detached from Stop.
	base context.Context
	jobs *PeriodicJobs
	// insert enqueues one job in tx through the client's insert path and
	// returns its queue.
	insert func(ctx context.Context, tx pgx.Tx, args JobArgs, opts *EnqueueOpts) (queue string, err error)
	// wake tells the local producer of a queue that jobs wait.
	wake func(queue string)
	// leaderTTL sets the default of MissedAfter and how long a leader
	// paused in its transaction may hold a job's row.
	leaderTTL time.Duration
}

const (
	// periodicMaxSleep bounds the sleep until the next instant: the task
	// reads the database's time again at least this often.
	periodicMaxSleep = time.Minute
	// periodicRetryDelay is the wait after a failed pass or transaction.
	periodicRetryDelay = time.Second
	// periodicBusyDelay is the wait when another transaction holds a job's
	// row.
	periodicBusyDelay = 100 * time.Millisecond
	// periodicRunsPerTx bounds the runs one transaction enqueues for a job;
	// the rest follow in the next.
	periodicRunsPerTx = 100
)

// The runs of a periodic job, as recorded in the job's Meta.
const (
	periodicRunScheduled = "scheduled"
	periodicRunCatchUp   = "catch_up"
	periodicRunStart     = "start"
)

// run enqueues due runs until ctx (the term) ends. The term fences runs on
// start: one per term.
func (p *periodicEnqueuer) run(ctx context.Context, term int64) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.jobs.changed:
		case <-timer.C:
		}
		if ctx.Err() != nil {
			return // the term ended while the timer fired
		}
		timer.Reset(p.pass(ctx, term))
	}
}

// pass looks at every job once, enqueues those due, and returns how long
// to sleep before the next instant of any job.
func (p *periodicEnqueuer) pass(ctx context.Context, term int64) time.Duration {
	jobs := p.jobs.snapshot()
	if len(jobs) == 0 {
		return periodicMaxSleep // until the set changes
	}
	now, states, err := p.states(jobs)
	if err != nil {
		p.log.Error("pgqueue: periodic jobs: read state failed", "err", err)
		return periodicRetryDelay
	}
	wait := periodicMaxSleep
	for _, job := range jobs {
		if ctx.Err() != nil {
			return 0
		}
		st, seen := states[job.name]
		// Without a row, the job is new: create it (and run on start).
		due := !seen || job.opts.RunOnStart && st.startedBefore(term)
		var next time.Time
		if seen {
			next = nextInstant(job.schedule, st.last)
			due = due || !next.IsZero() && !next.After(now)
		}
		if !due {
			if !next.IsZero() {
				wait = min(wait, next.Sub(now))
			}
			continue
		}
		d, err := p.enqueueDue(job, term)
		if err != nil {
			p.log.Error("pgqueue: periodic job: enqueue failed", "periodic_job", job.name, "err", err)
			d = periodicRetryDelay
		}
		wait = min(wait, d)
	}
	return max(wait, 0)
}

// periodicState is a job's row of periodic_jobs.
type periodicState struct {
	last      time.Time
	startTerm *int64
}

// startedBefore reports whether no term up to term ran the job on start.
func (s periodicState) startedBefore(term int64) bool {
	return s.startTerm == nil || *s.startTerm < term
}

// states reads the database time and the recorded state of jobs.
func (p *periodicEnqueuer) states(jobs []*PeriodicJob) (time.Time, map[string]periodicState, error) {
	ctx, cancel := context.WithTimeout(p.base, jobsql.WriteTimeout)
	defer cancel()
	names := make([]string, len(jobs))
	for i, j := range jobs {
		names[i] = j.name
	}
	rows, err := p.pool.Query(ctx, p.q.PeriodicStates, names)
	if err != nil {
		return time.Time{}, nil, dbError("periodic states", err)
	}
	defer rows.Close()
	var now time.Time
	states := make(map[string]periodicState, len(jobs))
	for rows.Next() {
		var name *string
		var st periodicState
		var last *time.Time
		if err := rows.Scan(&now, &name, &last, &st.startTerm); err != nil {
			return time.Time{}, nil, dbError("periodic states", err)
		}
		if name != nil && last != nil {
			st.last = *last
			states[*name] = st
		}
	}
	return now, states, dbError("periodic states", rows.Err())
}

// enqueueDue enqueues job's due runs in one transaction and returns how
// long until its next instant (zero when more runs are due already).
func (p *periodicEnqueuer) enqueueDue(job *PeriodicJob, term int64) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(p.base, jobsql.WriteTimeout)
	defer cancel()
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return 0, dbError("periodic "+job.name+": begin", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// A leader paused in this transaction must not keep the row from the
	// next leader for long: the server ends the session, and the lock.
	if _, err := tx.Exec(ctx, p.q.SetIdleTimeout, fmt.Sprint(p.leaderTTL.Milliseconds())); err != nil {
		return 0, dbError("periodic "+job.name, err)
	}
	st, now, err := p.lock(ctx, tx, job.name)
	switch {
	case errors.Is(err, errPeriodicBusy):
		p.log.Debug("pgqueue: periodic job's row is held by another transaction", "periodic_job", job.name)
		return periodicBusyDelay, nil
	case err != nil:
		return 0, err
	}

	missedAfter := cmp.Or(job.opts.MissedAfter, max(defaultPeriodicMissedAfter, 3*p.leaderTTL))
	plan := planPeriodic(job.schedule, job.opts, st, now, term, missedAfter, periodicRunsPerTx)
	if !plan.skipped.first.IsZero() {
		p.log.Info("pgqueue: periodic job missed instants", "periodic_job", job.name,
			"first", plan.skipped.first, "last", plan.skipped.last, "catch_up", job.opts.Missed == MissedCatchUp)
	}
	queues := map[string]struct{}{}
	for _, r := range plan.runs {
		args, opts, err := construct(job)
		if err == nil && args == nil {
			p.log.Debug("pgqueue: periodic job's constructor skipped a run", "periodic_job", job.name, "instant", r.instant)
			continue
		}
		var queue string
		if err == nil {
			queue, err = p.insert(ctx, tx, args, periodicOpts(opts, job.name, r))
		}
		if isInvalidJob(err) {
			// It would fail the same way at every try: the instant
			// counts as done, or the schedule would stall on it.
			p.log.Error("pgqueue: periodic job's run is invalid; skipped", "periodic_job", job.name, "instant", r.instant, "err", err)
			continue
		}
		if err != nil {
			return 0, err
		}
		queues[queue] = struct{}{}
	}
	if plan.last.After(st.last) {
		if err := p.record(ctx, tx, p.q.PeriodicAdvance, job.name, plan.last); err != nil {
			return 0, err
		}
	}
	if plan.started {
		if err := p.record(ctx, tx, p.q.PeriodicStarted, job.name, term); err != nil {
			return 0, err
		}
	}
	// For operators: the schedule and its next instant, as this leader sees
	// them.
	done := st.last
	if plan.last.After(done) {
		done = plan.last
	}
	next := pgtype.Timestamptz{Time: nextInstant(job.schedule, done)}
	next.Valid = !next.Time.IsZero()
	if _, err := tx.Exec(ctx, p.q.PeriodicDescribe, job.name, describeSchedule(job.schedule), next); err != nil {
		return 0, dbError("periodic "+job.name+": describe", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, dbError("periodic "+job.name+": commit", err)
	}
	for q := range queues {
		p.wake(q)
	}
	return plan.wait, nil
}

// errPeriodicBusy says another transaction holds a periodic job's row.
var errPeriodicBusy = errors.New("periodic job row busy")

// lock locks job name's row in tx, creating it the first time, and returns
// its state and the database time.
func (p *periodicEnqueuer) lock(ctx context.Context, tx pgx.Tx, name string) (periodicState, time.Time, error) {
	var st periodicState
	var now time.Time
	err := tx.QueryRow(ctx, p.q.PeriodicLock, name).Scan(&st.last, &st.startTerm, &now)
	if errors.Is(err, pgx.ErrNoRows) {
		err = tx.QueryRow(ctx, p.q.PeriodicCreate, name).Scan(&st.last, &st.startTerm, &now)
		if errors.Is(err, pgx.ErrNoRows) {
			return st, now, errPeriodicBusy
		}
	}
	if err != nil {
		return st, now, dbError("periodic "+name+": lock", err)
	}
	return st, now, nil
}

// record runs one of the statements that move a job's row on, which the
// database refuses (no row changed) when the instant or the term does not
// grow: then nothing of the transaction may commit.
func (p *periodicEnqueuer) record(ctx context.Context, tx pgx.Tx, query, name string, arg any) error {
	tag, err := tx.Exec(ctx, query, name, arg)
	if err != nil {
		return dbError("periodic "+name+": record", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("pgqueue: periodic %s: the database refused to record %v", name, arg)
	}
	return nil
}

// construct calls job's constructor; a panic becomes an error.
func construct(job *PeriodicJob) (args JobArgs, opts *EnqueueOpts, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w job args: periodic job %q: constructor panicked: %v", ErrInvalid, job.name, r)
		}
	}()
	args, opts = job.constructor()
	return args, opts, nil
}

// isInvalidJob reports whether err says a job is invalid, before anything
// was sent to the database, or that an insert middleware chose to skip it:
// either way, trying again would end the same.
func isInvalidJob(err error) bool {
	for _, target := range []error{ErrInvalid, ErrInvalid, ErrInvalid, ErrInvalid, ErrTooLarge, ErrNotEnqueued} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// periodicOpts returns opts with the run's mark in Meta, leaving opts as
// the constructor made it.
func periodicOpts(opts *EnqueueOpts, name string, r periodicRun) *EnqueueOpts {
	var o EnqueueOpts
	if opts != nil {
		o = *opts
	}
	meta := make(map[string]any, len(o.Meta)+1)
	maps.Copy(meta, o.Meta)
	meta["periodic"] = map[string]any{"name": name, "instant": r.instant.UTC().Format(time.RFC3339Nano), "run": r.kind}
	o.Meta = meta
	return &o
}

// periodicRun is one run to enqueue.
type periodicRun struct {
	instant time.Time
	kind    string // periodicRunScheduled, periodicRunCatchUp or periodicRunStart
}

// periodicPlan is what one transaction does for a job.
type periodicPlan struct {
	runs []periodicRun
	// last is the instant to record: the last run's, or that of the last
	// instant skipped.
	last time.Time
	// started says runs hold the run on start of the term.
	started bool
	// skipped are the first and last missed instants, if any.
	skipped struct{ first, last time.Time }
	// wait is how long from now until the next instant after last; zero
	// when it is due already (the runs were limited).
	wait time.Duration
}

// planPeriodic decides, from a job's recorded state and the database's
// time now, what is due: the run on start if this term has not made it;
// the instants after st.last up to now, each once; instants more than
// missedAfter before now are missed (skipped, or the latest of them run
// once, as opts.Missed says). At most limit runs.
func planPeriodic(s PeriodicSchedule, opts PeriodicJobOpts, st periodicState, now time.Time, term int64, missedAfter time.Duration, limit int) periodicPlan {
	plan := periodicPlan{last: st.last}
	if opts.RunOnStart && st.startedBefore(term) {
		plan.runs = append(plan.runs, periodicRun{instant: now, kind: periodicRunStart})
		plan.started = true
	}
	next := nextInstant(s, st.last)
	if cut := now.Add(-missedAfter); !next.IsZero() && next.Before(cut) {
		latest := latestBefore(s, st.last, cut).Truncate(time.Microsecond)
		if latest.After(st.last) {
			plan.skipped.first, plan.skipped.last = next, latest
			if opts.Missed == MissedCatchUp {
				plan.runs = append(plan.runs, periodicRun{instant: latest, kind: periodicRunCatchUp})
			}
			plan.last = latest
			next = nextInstant(s, latest)
		}
	}
	for !next.IsZero() && !next.After(now) && len(plan.runs) < limit {
		plan.runs = append(plan.runs, periodicRun{instant: next, kind: periodicRunScheduled})
		plan.last = next
		next = nextInstant(s, next)
	}
	switch {
	case next.IsZero():
		plan.wait = periodicMaxSleep
	case !next.After(now):
		plan.wait = 0
	default:
		plan.wait = next.Sub(now)
	}
	return plan
}

// nextInstant returns s's first instant after t, to the microsecond the
// database keeps, or the zero Time when there is none.
func nextInstant(s PeriodicSchedule, t time.Time) time.Time {
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
