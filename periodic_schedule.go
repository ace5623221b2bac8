package pgqueue

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// PeriodicSchedule says when a periodic job is due. Next returns the
// schedule's first instant strictly after t, or the zero Time when there is
// none.
//
// Next must be a pure function of t: every client computes the same
// instants from the same recorded one, which is what lets the database
// tell an instant already enqueued from a new one. The instants the
// package's schedules return are whole seconds (cron) or whole multiples of
// the interval since the Unix epoch (every); instants are stored to the
// microsecond, so a schedule of your own should return whole microseconds.
type PeriodicSchedule interface {
	Next(t time.Time) time.Time
}

// ScheduleError is returned by CronSchedule for an expression it cannot
// parse, and by New and PeriodicJobs.Add for a schedule out of range (an
// EverySchedule shorter than a second). It matches ErrInvalid with
// errors.Is, and the parser's error too.
type ScheduleError struct {
	// Expr is the expression, or "@every <d>" for an EverySchedule.
	Expr string
	// Err says what is wrong with it.
	Err error
}

// Error says which schedule is wrong and why.
func (e *ScheduleError) Error() string {
	return fmt.Sprintf("pgqueue: schedule %q: %v", e.Expr, e.Err)
}

// Unwrap returns ErrInvalid and the cause.
func (e *ScheduleError) Unwrap() []error { return []error{ErrInvalid, e.Err} }

// cronParser reads five fields (minute hour day-of-month month
// day-of-week), six with a leading seconds field, and the descriptors
// @yearly, @monthly, @weekly, @daily, @hourly and @every <duration>.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// CronSchedule parses a cron expression with github.com/robfig/cron/v3:
//
//   - five fields, "minute hour day-of-month month day-of-week"
//     ("30 3 * * *": 03:30 every day), or six with seconds first
//     ("*/10 * * * * *": every ten seconds);
//   - a time zone first, "CRON_TZ=Europe/Paris 0 0 9 * * MON-FRI" (or
//     "TZ=..."), read from the system's zone database (import time/tzdata
//     where there is none); without one, the expression is read in UTC, so
//     processes in different local zones agree on every instant;
//   - the descriptors @yearly, @monthly, @weekly, @daily, @hourly;
//   - "@every <duration>" ("@every 90s"), the same as EverySchedule.
//
// An expression it cannot parse, or one that never fires (February 30th),
// returns a *ScheduleError, which matches ErrInvalid.
func CronSchedule(expr string) (PeriodicSchedule, error) {
	fail := func(err error) (PeriodicSchedule, error) { return nil, &ScheduleError{Expr: expr, Err: err} }
	spec := strings.TrimSpace(expr)
	if rest, ok := cutZone(spec); ok && !strings.Contains(rest, " ") {
		// cron/v3 slices past the end of such a string.
		return fail(errors.New("a time zone needs an expression after it"))
	}
	if d, ok := strings.CutPrefix(spec, "@every "); ok {
		// Parsed here so that the interval keeps its exact value: cron/v3
		// rounds it to whole seconds and anchors it at the previous run.
		interval, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			return fail(err)
		}
		if interval < time.Second {
			return fail(errEveryTooShort)
		}
		return EverySchedule(interval), nil
	}
	parsed, err := cronParser.Parse(spec)
	if err != nil {
		return fail(err)
	}
	s := cronSchedule{spec: parsed, expr: spec}
	// A check only: when the schedule is due is decided from the
	// database's clock.
	if s.Next(time.Now()).IsZero() {
		return fail(errors.New("never fires"))
	}
	return s, nil
}

// cutZone returns what follows a "CRON_TZ=" or "TZ=" prefix.
func cutZone(spec string) (string, bool) {
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if rest, ok := strings.CutPrefix(spec, prefix); ok {
			return rest, true
		}
	}
	return "", false
}

// cronSchedule is a parsed cron expression.
type cronSchedule struct {
	spec cron.Schedule
	expr string
}

// String returns the expression as given.
func (s cronSchedule) String() string { return s.expr }

// Next returns the first instant after t. An expression without a time
// zone is read in UTC: cron/v3 reads it in t's location.
func (s cronSchedule) Next(t time.Time) time.Time { return s.spec.Next(t.UTC()) }

// EverySchedule returns a schedule due every d: at the whole multiples of d
// since the Unix epoch (every minute on the minute, every hour on the hour
// UTC), so every client agrees on the instants whenever it started. d is
// rounded down to a microsecond and must be at least a second: New and
// PeriodicJobs.Add refuse a shorter one with a *ScheduleError.
func EverySchedule(d time.Duration) PeriodicSchedule { return everySchedule{d: d} }

// everySchedule is due at the multiples of d since the Unix epoch.
type everySchedule struct{ d time.Duration }

// String returns the schedule as CronSchedule would read it.
func (s everySchedule) String() string { return "@every " + s.d.String() }

// Next returns the first multiple of d since the epoch after t.
func (s everySchedule) Next(t time.Time) time.Time {
	d := s.d.Microseconds()
	if d <= 0 {
		return time.Time{}
	}
	// Floor division: instants before the epoch are multiples too.
	us := t.UnixMicro()
	n := us / d
	if us%d < 0 {
		n--
	}
	return time.UnixMicro((n + 1) * d).UTC()
}

var errEveryTooShort = errors.New("interval must be at least 1s")

// validateSchedule checks a schedule given to NewPeriodicJob.
func validateSchedule(s PeriodicSchedule) error {
	switch s := s.(type) {
	case nil:
		return fmt.Errorf("%w option: nil periodic schedule", ErrInvalid)
	case everySchedule:
		if s.d < time.Second {
			return &ScheduleError{Expr: "@every " + s.d.String(), Err: errEveryTooShort}
		}
	}
	return nil
}
