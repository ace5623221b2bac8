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

// DSTPolicy says what a cron schedule in a zone with daylight saving time
// does with the wall-clock times a change skips or repeats.
type DSTPolicy int

const (
	// DSTOnce runs each wall-clock time of the expression once, as Debian's
	// cron does: a time the change to summer time skips (02:30 on a night
	// that goes from 02:00 to 03:00) runs at the first instant after the
	// gap (03:00), and a time the change back repeats (02:30 twice) runs
	// at its first occurrence only. It applies to expressions that name
	// wall-clock times: neither the minute nor the hour field starts with
	// "*" (nor "?"), and not @hourly. An expression with such a wildcard
	// runs by the clock as it reads after the change (an hourly job runs
	// every hour of real time: none in the skipped hour, twice at the
	// repeated one), as Debian's cron does. The default.
	DSTOnce DSTPolicy = iota
	// DSTStrict matches the expression against the clock as it reads,
	// as github.com/robfig/cron/v3 does: a skipped time does not run that
	// day, and a repeated one runs twice.
	DSTStrict
)

// CronOpts are the options of NewCronSchedule. The zero value (or nil) is
// the default of each field.
type CronOpts struct {
	// DST says what happens to the times a daylight saving change skips
	// or repeats. Default DSTOnce. Expressions read in UTC (without
	// CRON_TZ=) have no such changes.
	DST DSTPolicy
}

// CronSchedule parses a cron expression with the default options: it is
// NewCronSchedule(expr, nil).
func CronSchedule(expr string) (PeriodicSchedule, error) { return NewCronSchedule(expr, nil) }

// NewCronSchedule parses a cron expression with github.com/robfig/cron/v3:
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
// In a zone with daylight saving time, opts.DST says what the times the
// changes skip or repeat do; by default (DSTOnce) each runs once. A nil
// opts means defaults.
//
// An expression it cannot parse, one that never fires (February 30th), or
// an unknown DSTPolicy returns a *ScheduleError, which matches ErrInvalid.
func NewCronSchedule(expr string, opts *CronOpts) (PeriodicSchedule, error) {
	fail := func(err error) (PeriodicSchedule, error) { return nil, &ScheduleError{Expr: expr, Err: err} }
	var o CronOpts
	if opts != nil {
		o = *opts
	}
	if o.DST != DSTOnce && o.DST != DSTStrict {
		return fail(fmt.Errorf("unknown DSTPolicy %d", o.DST))
	}
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
	if ss, ok := parsed.(*cron.SpecSchedule); ok && o.DST == DSTOnce && namesWallClock(spec) &&
		ss.Location != time.Local && ss.Location != time.UTC {
		// The same fields over a clock without changes: the wall times
		// of the expression, as dates in UTC.
		wall := *ss
		wall.Location = time.UTC
		s.once = &onceSpec{wall: &wall, loc: ss.Location}
	}
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

// namesWallClock reports whether a parsed expression names wall-clock
// times, in Debian cron's sense: neither its minute nor its hour field is
// a wildcard (starts with "*" or "?"), and it is not @hourly.
func namesWallClock(spec string) bool {
	if rest, ok := cutZone(spec); ok {
		_, spec, _ = strings.Cut(rest, " ")
	}
	fields := strings.Fields(spec)
	if len(fields) == 1 {
		return fields[0] != "@hourly" // @daily, @weekly, ... name midnight
	}
	if len(fields) == 6 {
		fields = fields[1:] // seconds first
	}
	for _, f := range fields[:2] {
		if strings.HasPrefix(f, "*") || strings.HasPrefix(f, "?") {
			return false
		}
	}
	return true
}

// cronSchedule is a parsed cron expression.
type cronSchedule struct {
	spec cron.Schedule
	expr string
	// once, when set, runs each wall time once across daylight saving
	// changes (DSTOnce); spec is then only used by String.
	once *onceSpec
}

// String returns the expression as given.
func (s cronSchedule) String() string { return s.expr }

// Next returns the first instant after t. An expression without a time
// zone is read in UTC: cron/v3 reads it in t's location.
func (s cronSchedule) Next(t time.Time) time.Time {
	if s.once != nil {
		return s.once.next(t)
	}
	return s.spec.Next(t.UTC())
}

// onceSpec is a cron expression's wall times in a zone, each run once:
// a wall time a change skips runs at the end of the gap, one it repeats at
// its first occurrence. That maps wall times to instants without ever
// going back, so Next stays monotonic, as PlanPeriodic's search needs.
type onceSpec struct {
	// wall is the expression's fields with the location UTC: its Next
	// steps through wall-clock dates, which UTC has no changes to.
	wall *cron.SpecSchedule
	loc  *time.Location
}

// next returns the instant of the first wall time of the expression whose
// instant is after t.
func (s *onceSpec) next(t time.Time) time.Time {
	lt := t.In(s.loc)
	from := wallOf(lt)
	// In the second pass of a repeated hour, the wall times up to the
	// end of the repetition ran in the first pass.
	if start, _ := lt.ZoneBounds(); !start.IsZero() {
		_, before := start.Add(-time.Nanosecond).In(s.loc).Zone()
		if _, off := lt.Zone(); before > off {
			if end := wallOf(start.In(s.loc)).Add(time.Duration(before-off) * time.Second); from.Before(end) {
				from = end.Add(-time.Nanosecond)
			}
		}
	}
	for {
		w := s.wall.Next(from)
		if w.IsZero() {
			return w
		}
		// Always after t but for a wall time of a repetition t has gone
		// past, which the next one is not.
		if at := firstInstant(w, s.loc); at.After(t) {
			return at.UTC()
		}
		from = w
	}
}

// wallOf returns t's wall-clock reading as the same date in UTC.
func wallOf(t time.Time) time.Time {
	y, mo, d := t.Date()
	h, mi, sec := t.Clock()
	return time.Date(y, mo, d, h, mi, sec, t.Nanosecond(), time.UTC)
}

// firstInstant returns the first instant at which the clock of loc reads
// w (a wall time as a date in UTC), or, when a change skips w, the first
// instant after the gap.
func firstInstant(w time.Time, loc *time.Location) time.Time {
	at := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
	start, end := at.ZoneBounds()
	switch got := wallOf(at); {
	case got.After(w): // skipped; time.Date went past the gap
		return start
	case got.Before(w): // skipped; time.Date stopped before the gap
		return end
	}
	// Repeated: the same reading an offset's difference earlier, in the
	// zone before this one.
	if !start.IsZero() {
		_, before := start.Add(-time.Nanosecond).In(loc).Zone()
		if _, off := at.Zone(); before > off {
			if first := at.Add(-time.Duration(before-off) * time.Second); first.Before(start) {
				return first
			}
		}
	}
	return at
}

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
