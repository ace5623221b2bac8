package pgqueue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// PeriodicJobConstructor returns the args and insert options of one run of
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
// It returns an error matching ErrInvalid when the job is invalid
// (a *ScheduleError for its schedule), and ErrInvalid when its
// name is taken; to change a job, Remove it and Add the new one.
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

// enqueuePeriodic inserts one run of a periodic job in tx, through the
// client's insert path, and returns its queue.
func (c *Client) enqueuePeriodic(ctx context.Context, tx pgx.Tx, args JobArgs, opts *EnqueueOpts) (string, error) {
	res, err := c.EnqueueTx(ctx, tx, args, opts)
	if err != nil {
		return "", err
	}
	return res.Queue, nil
}
