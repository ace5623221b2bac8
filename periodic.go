package pgqueue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/maintenance"
)

// PeriodicJobConstructor returns the args and enqueue options of one run of
// a periodic job. Returning nil args skips the run: the instant counts as
// done and nothing is enqueued. It is called on the maintenance leader,
// inside the transaction that records the instant, so it should be quick
// and must not use the database itself.
type PeriodicJobConstructor func() (JobArgs, *EnqueueOpts)

// MissedPolicy says what a periodic job does about the instants it missed
// (see PeriodicJobOpts.MissedAfter).
type MissedPolicy int

const (
	// MissedSkip drops missed instants: the job next runs at its first
	// instant that is not missed. The default.
	MissedSkip MissedPolicy = iota
	// MissedCatchUp enqueues one run, at once, for the latest missed
	// instant, however many were missed; then the schedule resumes.
	MissedCatchUp
)

// PeriodicJobOpts are the options of a periodic job. The zero value (or
// nil) runs the job at its scheduled instants only and skips those missed.
type PeriodicJobOpts struct {
	// RunOnStart enqueues the job once at the start of every term of the
	// maintenance leader (when a client becomes the leader, and when the
	// job is added to the leading client), besides its schedule: so once
	// after a deploy, and once more after a leader change. The database
	// records the term, so a term runs it at most once and never after a
	// later term did.
	RunOnStart bool

	// Missed says what to do with missed instants. Default MissedSkip.
	Missed MissedPolicy

	// MissedAfter is how late an instant may still be enqueued. The leader
	// enqueues each instant once it is due by the database clock; one that
	// it finds more than MissedAfter past (no client was leading: a
	// downtime, or the job was removed for a while) is missed, and Missed
	// says what happens to it. Instants that came due during a leader
	// change shorter than this are all enqueued, late. Default
	// 1m, or three Config.LeaderTTL when that is
	// longer; keep it above LeaderTTL.
	MissedAfter time.Duration
}

// PeriodicJob is a job enqueued on a schedule by the maintenance leader.
// Create it with NewPeriodicJob and give it to Config.PeriodicJobs or
// Client.PeriodicJobs().Add.
//
// Each instant of the schedule is enqueued at most once, across leader
// changes, crashes and restarts of every process: the database keeps, per
// name, the last instant enqueued, and the leader records an instant in
// the same transaction as its job, under that row's lock. The first time
// a name is seen, the schedule starts from then: nothing before it is
// enqueued.
//
// Every job it enqueues carries in its Meta (besides the constructor's) a
// key "periodic": {"name": the job's name, "instant": the instant,
// "run": "scheduled", "catch_up" or "start"} (for a run on start, the
// instant is the database time of the run).
type PeriodicJob struct {
	name        string
	schedule    PeriodicSchedule
	constructor PeriodicJobConstructor
	opts        PeriodicJobOpts
}

// NewPeriodicJob returns the periodic job name, due on schedule, whose
// runs constructor makes. The name identifies the job across processes and
// restarts (the database records its instants under it): keep it stable,
// and give every client that runs the job the same one. It is 1 to 255
// bytes of UTF-8. A nil opts means defaults. New and PeriodicJobs.Add
// validate the job.
func NewPeriodicJob(name string, schedule PeriodicSchedule, constructor PeriodicJobConstructor, opts *PeriodicJobOpts) *PeriodicJob {
	j := &PeriodicJob{name: name, schedule: schedule, constructor: constructor}
	if opts != nil {
		j.opts = *opts
	}
	return j
}

// Name returns the job's name.
func (j *PeriodicJob) Name() string { return j.name }

// validate checks a job before it joins a client's periodic jobs.
func (j *PeriodicJob) validate() error {
	if j == nil {
		return fmt.Errorf("%w option: nil periodic job", ErrInvalid)
	}
	if j.name == "" || len(j.name) > 255 || !utf8.ValidString(j.name) || strings.ContainsRune(j.name, 0) {
		return fmt.Errorf("%w option: periodic job name %q: want 1 to 255 bytes of UTF-8", ErrInvalid, j.name)
	}
	if err := validateSchedule(j.schedule); err != nil {
		return fmt.Errorf("periodic job %q: %w", j.name, err)
	}
	switch {
	case j.constructor == nil:
		return fmt.Errorf("%w option: periodic job %q: nil constructor", ErrInvalid, j.name)
	case j.opts.Missed != MissedSkip && j.opts.Missed != MissedCatchUp:
		return fmt.Errorf("%w option: periodic job %q: unknown MissedPolicy %d", ErrInvalid, j.name, j.opts.Missed)
	case j.opts.MissedAfter < 0:
		return fmt.Errorf("%w option: periodic job %q: MissedAfter must not be negative, got %s", ErrInvalid, j.name, j.opts.MissedAfter)
	}
	return nil
}

// PeriodicJobs is a client's set of periodic jobs, by name: those of
// Config.PeriodicJobs, then whatever Add and Remove change while it runs.
// The client enqueues them while it leads maintenance. It is safe for
// concurrent use.
type PeriodicJobs struct {
	mu   sync.Mutex
	jobs map[string]*PeriodicJob
	// changed has a value when the set changed since the leader's task
	// last looked.
	changed chan struct{}
}

// newPeriodicJobs validates jobs and returns them as a set.
func newPeriodicJobs(jobs []*PeriodicJob) (*PeriodicJobs, error) {
	p := &PeriodicJobs{jobs: make(map[string]*PeriodicJob, len(jobs)), changed: make(chan struct{}, 1)}
	for _, j := range jobs {
		if err := p.Add(j); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Add adds job to the set. A leading client takes it into account at once.
// It returns an error matching ErrInvalid when the job is invalid (a
// *ScheduleError for its schedule) or its name is taken; to change a job,
// Remove it and Add the new one.
func (p *PeriodicJobs) Add(job *PeriodicJob) error {
	if err := job.validate(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.jobs[job.name]; ok {
		return fmt.Errorf("%w periodic job: name already taken: %q", ErrInvalid, job.name)
	}
	p.jobs[job.name] = job
	p.signal()
	return nil
}

// Remove removes the job called name from the set and reports whether it
// was there. The database keeps the job's last instant: added again later,
// the job treats the instants in between as late or missed (see
// PeriodicJobOpts.MissedAfter).
func (p *PeriodicJobs) Remove(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.jobs[name]; !ok {
		return false
	}
	delete(p.jobs, name)
	p.signal()
	return true
}

// Names returns the names of the jobs in the set, sorted.
func (p *PeriodicJobs) Names() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	names := make([]string, 0, len(p.jobs))
	for name := range p.jobs {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// snapshot returns the jobs in the set.
func (p *PeriodicJobs) snapshot() []*PeriodicJob {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*PeriodicJob, 0, len(p.jobs))
	for _, j := range p.jobs {
		out = append(out, j)
	}
	return out
}

// signal tells the leader's task, if any, that the set changed. Call with
// mu held.
func (p *PeriodicJobs) signal() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// PeriodicJobs returns the client's periodic jobs, to add or remove some
// while it runs.
func (c *Client) PeriodicJobs() *PeriodicJobs { return c.periodic }

// periodicEnqueuer returns the maintenance task that enqueues c's
// periodic jobs, its writes under base.
func (c *Client) periodicEnqueuer(base context.Context) *maintenance.PeriodicEnqueuer {
	return &maintenance.PeriodicEnqueuer{Pool: c.pool, Q: c.q, Log: c.log, Base: base,
		Jobs: c.periodicJobs, Changed: c.periodic.changed, Wake: c.wake, LeaderTTL: c.config.LeaderTTL}
}

// periodicJobs returns the jobs of c.periodic as the maintenance task
// enqueues them, each with its defaults applied.
func (c *Client) periodicJobs() []*maintenance.PeriodicJob {
	jobs := c.periodic.snapshot()
	missedAfter := max(defaultPeriodicMissedAfter, 3*c.config.LeaderTTL)
	out := make([]*maintenance.PeriodicJob, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, &maintenance.PeriodicJob{
			Name: j.name, Schedule: j.schedule, RunOnStart: j.opts.RunOnStart,
			CatchUp:     j.opts.Missed == MissedCatchUp,
			MissedAfter: cmp.Or(j.opts.MissedAfter, missedAfter),
			Enqueue: func(ctx context.Context, tx pgx.Tx, run maintenance.PeriodicRun) (string, bool, error) {
				return c.enqueuePeriodic(ctx, tx, j, run)
			},
		})
	}
	return out
}

// enqueuePeriodic makes run of job with its constructor and enqueues it in
// tx through the client's enqueue path. It returns the job's queue, or ""
// when the constructor skipped the run; with an error, invalid says that
// trying again would end the same.
func (c *Client) enqueuePeriodic(ctx context.Context, tx pgx.Tx, job *PeriodicJob, run maintenance.PeriodicRun) (queue string, invalid bool, err error) {
	args, opts, err := construct(job)
	if err == nil && args == nil {
		return "", false, nil
	}
	if err == nil {
		var res *EnqueueResult
		if res, err = c.EnqueueTx(ctx, tx, args, periodicOpts(opts, job.name, run)); err == nil {
			return res.Queue, false, nil
		}
	}
	return "", isInvalidJob(err), err
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
// was sent to the database, or that an enqueue middleware chose to skip it:
// either way, trying again would end the same.
func isInvalidJob(err error) bool {
	for _, target := range []error{ErrInvalid, ErrTooLarge, ErrNotEnqueued} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// periodicOpts returns opts with the run's mark in Meta, leaving opts as
// the constructor made it.
func periodicOpts(opts *EnqueueOpts, name string, r maintenance.PeriodicRun) *EnqueueOpts {
	var o EnqueueOpts
	if opts != nil {
		o = *opts
	}
	meta := make(map[string]any, len(o.Meta)+1)
	maps.Copy(meta, o.Meta)
	meta["periodic"] = map[string]any{"name": name, "instant": r.Instant.UTC().Format(time.RFC3339Nano), "run": r.Kind}
	o.Meta = meta
	return &o
}
