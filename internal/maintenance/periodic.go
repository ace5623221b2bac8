package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/internal/schemawatch"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// PeriodicEnqueuer enqueues the due runs of the client's periodic jobs. It
// runs on the maintenance leader. It keeps nothing between passes: the
// table periodic_jobs says, per job, up to which instant the schedule is
// done, and each due job is enqueued in one transaction that locks its
// row, decides from the database's now() what is due, inserts the runs and
// moves the row on (sql/periodic_*.sql). So two leaders at once (one
// paused past its term) can never enqueue an instant twice.
type PeriodicEnqueuer struct {
	Pool *pgxpool.Pool
	Q    *jobsql.Queries
	Log  *slog.Logger
	// Base is the parent of its writes, detached from Stop.
	Base context.Context
	// Jobs returns the client's periodic jobs as they are now.
	Jobs func() []*PeriodicJob
	// Changed has a value when the set of jobs changed since the task last
	// looked.
	Changed <-chan struct{}
	// Wake tells the local producer of a queue that jobs wait.
	Wake func(queue string)
	// LeaderTTL bounds how long a leader paused in its transaction may
	// hold a job's row.
	LeaderTTL time.Duration
	// Watch holds its passes back while the schema is outdated; nil for
	// none.
	Watch *schemawatch.Watch

	rounds *rounds // made by the first Pass
}

// PeriodicJob is one of the client's periodic jobs, as the enqueuer sees
// it.
type PeriodicJob struct {
	// Name identifies the job's row of periodic_jobs.
	Name     string
	Schedule Schedule
	// RunOnStart runs the job once per term of the leader.
	RunOnStart bool
	// CatchUp runs the latest missed instant once; otherwise missed
	// instants are skipped.
	CatchUp bool
	// MissedAfter is how late an instant may still be enqueued, default
	// applied.
	MissedAfter time.Duration
	// Enqueue builds run and enqueues it in tx through the client's
	// enqueue path. It returns the job's queue, or "" and no error when
	// the job's constructor skipped the run. With an error, invalid says
	// that the run would fail the same way at every try: the instant is
	// skipped rather than tried again.
	Enqueue func(ctx context.Context, tx pgx.Tx, run PeriodicRun) (queue string, invalid bool, err error)
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

// Run enqueues due runs until ctx (the term) ends. The term fences runs on
// start: one per term.
func (p *PeriodicEnqueuer) Run(ctx context.Context, term int64) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.Changed:
		case <-timer.C:
		}
		if ctx.Err() != nil {
			return // the term ended while the timer fired
		}
		timer.Reset(p.Pass(ctx, term))
	}
}

// Pass looks at every job once, enqueues those due as the leader of term,
// and returns how long to sleep before the next instant of any job.
func (p *PeriodicEnqueuer) Pass(ctx context.Context, term int64) time.Duration {
	jobs := p.Jobs()
	if len(jobs) == 0 {
		return periodicMaxSleep // until the set changes
	}
	if p.rounds == nil {
		p.rounds = newRounds(p.Watch, p.Log, "periodic jobs: read state")
	}
	if p.rounds.held() {
		return max(p.Watch.Wait(), periodicRetryDelay)
	}
	now, states, err := p.states(jobs)
	if p.rounds.done(ctx, err) {
		return periodicRetryDelay
	}
	wait := periodicMaxSleep
	for _, job := range jobs {
		if ctx.Err() != nil {
			return 0
		}
		st, seen := states[job.Name]
		// Without a row, the job is new: create it (and run on start).
		due := !seen || job.RunOnStart && st.startedBefore(term)
		var next time.Time
		if seen {
			next = nextInstant(job.Schedule, st.Last)
			due = due || !next.IsZero() && !next.After(now)
		}
		if !due {
			if !next.IsZero() {
				wait = min(wait, next.Sub(now))
			}
			continue
		}
		d, err := p.enqueueDue(job, term)
		if err = p.Watch.Observe(ctx, err); errors.Is(err, pgqueuetype.ErrSchemaOutdated) {
			return max(p.Watch.Wait(), periodicRetryDelay) // said by the watch
		}
		if err != nil {
			p.Log.Error("pgqueue: periodic job: enqueue failed", "periodic_job", job.Name, "err", err)
			d = periodicRetryDelay
		}
		wait = min(wait, d)
	}
	return max(wait, 0)
}

// states reads the database time and the recorded state of jobs.
func (p *PeriodicEnqueuer) states(jobs []*PeriodicJob) (time.Time, map[string]PeriodicState, error) {
	ctx, cancel := context.WithTimeout(p.Base, jobsql.WriteTimeout)
	defer cancel()
	names := make([]string, len(jobs))
	for i, j := range jobs {
		names[i] = j.Name
	}
	rows, err := p.Pool.Query(ctx, p.Q.PeriodicStates, names)
	if err != nil {
		return time.Time{}, nil, dbError("periodic states", err)
	}
	defer rows.Close()
	var now time.Time
	states := make(map[string]PeriodicState, len(jobs))
	for rows.Next() {
		var name *string
		var st PeriodicState
		var last *time.Time
		if err := rows.Scan(&now, &name, &last, &st.StartTerm); err != nil {
			return time.Time{}, nil, dbError("periodic states", err)
		}
		if name != nil && last != nil {
			st.Last = *last
			states[*name] = st
		}
	}
	return now, states, dbError("periodic states", rows.Err())
}

// enqueueDue enqueues job's due runs in one transaction and returns how
// long until its next instant (zero when more runs are due already).
func (p *PeriodicEnqueuer) enqueueDue(job *PeriodicJob, term int64) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(p.Base, jobsql.WriteTimeout)
	defer cancel()
	tx, err := p.Pool.Begin(ctx)
	if err != nil {
		return 0, dbError("periodic "+job.Name+": begin", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// A leader paused in this transaction must not keep the row from the
	// next leader for long: the server ends the session, and the lock.
	if _, err := tx.Exec(ctx, p.Q.SetIdleTimeout, fmt.Sprint(p.LeaderTTL.Milliseconds())); err != nil {
		return 0, dbError("periodic "+job.Name, err)
	}
	st, now, err := p.lock(ctx, tx, job.Name)
	switch {
	case errors.Is(err, errPeriodicBusy):
		p.Log.Debug("pgqueue: periodic job's row is held by another transaction", "periodic_job", job.Name)
		return periodicBusyDelay, nil
	case err != nil:
		return 0, err
	}

	plan := PlanPeriodic(job, st, now, term, periodicRunsPerTx)
	if !plan.Skipped.First.IsZero() {
		p.Log.Info("pgqueue: periodic job missed instants", "periodic_job", job.Name,
			"first", plan.Skipped.First, "last", plan.Skipped.Last, "catch_up", job.CatchUp)
	}
	queues := map[string]struct{}{}
	for _, r := range plan.Runs {
		queue, invalid, err := job.Enqueue(ctx, tx, r)
		switch {
		case err == nil && queue == "":
			p.Log.Debug("pgqueue: periodic job's constructor skipped a run", "periodic_job", job.Name, "instant", r.Instant)
			continue
		case invalid:
			// It would fail the same way at every try: the instant
			// counts as done, or the schedule would stall on it.
			p.Log.Error("pgqueue: periodic job's run is invalid; skipped", "periodic_job", job.Name, "instant", r.Instant, "err", err)
			continue
		case err != nil:
			return 0, err
		}
		queues[queue] = struct{}{}
	}
	if plan.Last.After(st.Last) {
		if err := p.record(ctx, tx, p.Q.PeriodicAdvance, job.Name, plan.Last); err != nil {
			return 0, err
		}
	}
	if plan.Started {
		if err := p.record(ctx, tx, p.Q.PeriodicStarted, job.Name, term); err != nil {
			return 0, err
		}
	}
	// For operators: the schedule and its next instant, as this leader sees
	// them.
	done := st.Last
	if plan.Last.After(done) {
		done = plan.Last
	}
	next := pgtype.Timestamptz{Time: nextInstant(job.Schedule, done)}
	next.Valid = !next.Time.IsZero()
	if _, err := tx.Exec(ctx, p.Q.PeriodicDescribe, job.Name, describeSchedule(job.Schedule), next); err != nil {
		return 0, dbError("periodic "+job.Name+": describe", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, dbError("periodic "+job.Name+": commit", err)
	}
	for q := range queues {
		p.Wake(q)
	}
	return plan.Wait, nil
}

// errPeriodicBusy says another transaction holds a periodic job's row.
var errPeriodicBusy = errors.New("periodic job row busy")

// lock locks job name's row in tx, creating it the first time, and returns
// its state and the database time.
func (p *PeriodicEnqueuer) lock(ctx context.Context, tx pgx.Tx, name string) (PeriodicState, time.Time, error) {
	var st PeriodicState
	var now time.Time
	err := tx.QueryRow(ctx, p.Q.PeriodicLock, name).Scan(&st.Last, &st.StartTerm, &now)
	if errors.Is(err, pgx.ErrNoRows) {
		err = tx.QueryRow(ctx, p.Q.PeriodicCreate, name).Scan(&st.Last, &st.StartTerm, &now)
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
func (p *PeriodicEnqueuer) record(ctx context.Context, tx pgx.Tx, query, name string, arg any) error {
	tag, err := tx.Exec(ctx, query, name, arg)
	if err != nil {
		return dbError("periodic "+name+": record", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("pgqueue: periodic %s: the database refused to record %v", name, arg)
	}
	return nil
}
