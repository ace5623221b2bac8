package pgqueue_test

import (
	"errors"
	"testing"
	"time"
	_ "time/tzdata" // the zones of the cron tests, whatever the system has

	"github.com/pgqueue/pgqueue"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	must(t, err)
	return v
}

func TestCronSchedule(t *testing.T) {
	t.Parallel()

	t.Run("NextInstants", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			name, expr, after string
			want              []string
		}{
			{"SecondsField", "*/10 * * * * *", "2024-01-15T12:00:03Z",
				[]string{"2024-01-15T12:00:10Z", "2024-01-15T12:00:20Z"}},
			{"FiveFieldsInUTC", "30 3 * * *", "2024-01-15T12:00:00+01:00",
				[]string{"2024-01-16T03:30:00Z", "2024-01-17T03:30:00Z"}},
			{"TimeZone", "CRON_TZ=America/New_York 0 0 9 * * MON-FRI", "2024-03-08T15:00:00Z",
				// Friday 9:00 EST has passed; Monday 9:00 is EDT (UTC-4).
				[]string{"2024-03-11T13:00:00Z", "2024-03-12T13:00:00Z"}},
			{"TZPrefix", "TZ=Asia/Kolkata 0 30 9 * * *", "2024-01-15T00:00:00Z",
				[]string{"2024-01-15T04:00:00Z", "2024-01-16T04:00:00Z"}},
			{"Descriptor", "@hourly", "2024-01-15T12:34:56Z",
				[]string{"2024-01-15T13:00:00Z", "2024-01-15T14:00:00Z"}},
			{"EveryIsAnchoredAtTheEpoch", "@every 90s", "1970-01-01T00:01:00.5Z",
				[]string{"1970-01-01T00:01:30Z", "1970-01-01T00:03:00Z"}},
			{"EveryKeepsSubSeconds", "@every 1500ms", "2024-01-15T12:00:00Z",
				[]string{"2024-01-15T12:00:01.5Z", "2024-01-15T12:00:03Z"}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				s, err := pgqueue.CronSchedule(tt.expr)
				must(t, err)
				at := mustTime(t, tt.after)
				for _, w := range tt.want {
					at = s.Next(at)
					if want := mustTime(t, w); !at.Equal(want) {
						t.Fatalf("%q: next %s, want %s", tt.expr, at, want)
					}
				}
			})
		}
	})

	t.Run("InvalidExpressionIsScheduleError", func(t *testing.T) {
		t.Parallel()
		for _, expr := range []string{
			"", "not cron", "61 * * * *", "* * * * * * *", "0 0 30 2 *",
			"TZ=UTC", "CRON_TZ=Nowhere/Atlantis 0 * * * *", "@every", "@every x", "@every 500ms", "@fortnightly",
		} {
			s, err := pgqueue.CronSchedule(expr)
			var se *pgqueue.ScheduleError
			if !errors.As(err, &se) || !errors.Is(err, pgqueue.ErrInvalid) || s != nil {
				t.Errorf("%q: schedule %v, error %v; want a *ScheduleError matching ErrInvalid", expr, s, err)
				continue
			}
			if se.Expr != expr || se.Err == nil {
				t.Errorf("%q: ScheduleError %+v", expr, se)
			}
		}
	})
}

func TestEverySchedule(t *testing.T) {
	t.Parallel()
	s := pgqueue.EverySchedule(time.Hour)
	for _, tt := range []struct{ after, want string }{
		{"2024-01-15T12:00:00Z", "2024-01-15T13:00:00Z"},
		{"2024-01-15T12:59:59.999999Z", "2024-01-15T13:00:00Z"},
		{"2024-01-15T14:30:00+02:00", "2024-01-15T13:00:00Z"},
		{"1969-12-31T22:30:00Z", "1969-12-31T23:00:00Z"},
	} {
		if got := s.Next(mustTime(t, tt.after)); !got.Equal(mustTime(t, tt.want)) {
			t.Errorf("Next(%s) = %s, want %s", tt.after, got, tt.want)
		}
	}
}

func TestPlanPeriodic(t *testing.T) {
	t.Parallel()
	every := pgqueue.EverySchedule(time.Second)
	hourly, err := pgqueue.CronSchedule("0 * * * *")
	must(t, err)
	term5 := int64(5)
	type run struct {
		at   string
		kind string
	}
	for _, tt := range []struct {
		name        string
		s           pgqueue.PeriodicSchedule
		opts        pgqueue.PeriodicJobOpts
		last, now   string
		startTerm   *int64
		missedAfter time.Duration
		limit       int
		want        []run
		wantLast    string
		wantWait    time.Duration
	}{
		{name: "NotDueYet", s: every, last: "2024-01-15T12:00:00Z", now: "2024-01-15T12:00:00.4Z",
			wantLast: "2024-01-15T12:00:00Z", wantWait: 600 * time.Millisecond},
		{name: "DueInstant", s: every, last: "2024-01-15T12:00:00Z", now: "2024-01-15T12:00:01.25Z",
			want: []run{{"2024-01-15T12:00:01Z", "scheduled"}}, wantLast: "2024-01-15T12:00:01Z", wantWait: 750 * time.Millisecond},
		{name: "LateInstantsEachOnce", s: every, last: "2024-01-15T12:00:00Z", now: "2024-01-15T12:00:03Z",
			want:     []run{{"2024-01-15T12:00:01Z", "scheduled"}, {"2024-01-15T12:00:02Z", "scheduled"}, {"2024-01-15T12:00:03Z", "scheduled"}},
			wantLast: "2024-01-15T12:00:03Z", wantWait: time.Second},
		{name: "LimitLeavesTheRestDue", s: every, last: "2024-01-15T12:00:00Z", now: "2024-01-15T12:00:03Z", limit: 2,
			want:     []run{{"2024-01-15T12:00:01Z", "scheduled"}, {"2024-01-15T12:00:02Z", "scheduled"}},
			wantLast: "2024-01-15T12:00:02Z", wantWait: 0},
		{name: "MissedAreSkipped", s: every, last: "2024-01-15T10:00:00Z", now: "2024-01-15T12:00:00.5Z", missedAfter: 2 * time.Second,
			want:     []run{{"2024-01-15T11:59:59Z", "scheduled"}, {"2024-01-15T12:00:00Z", "scheduled"}},
			wantLast: "2024-01-15T12:00:00Z", wantWait: 500 * time.Millisecond},
		{name: "MissedAreCaughtUpOnce", s: every, opts: pgqueue.PeriodicJobOpts{Missed: pgqueue.MissedCatchUp},
			last: "2024-01-15T10:00:00Z", now: "2024-01-15T12:00:00.5Z", missedAfter: 2 * time.Second,
			want:     []run{{"2024-01-15T11:59:58Z", "catch_up"}, {"2024-01-15T11:59:59Z", "scheduled"}, {"2024-01-15T12:00:00Z", "scheduled"}},
			wantLast: "2024-01-15T12:00:00Z", wantWait: 500 * time.Millisecond},
		{name: "CronCatchUpAfterDays", s: hourly, opts: pgqueue.PeriodicJobOpts{Missed: pgqueue.MissedCatchUp},
			last: "2024-01-10T07:00:00Z", now: "2024-01-15T12:30:00Z", missedAfter: time.Minute,
			want: []run{{"2024-01-15T12:00:00Z", "catch_up"}}, wantLast: "2024-01-15T12:00:00Z", wantWait: 30 * time.Minute},
		{name: "CronSkipAfterDays", s: hourly, last: "2024-01-10T07:00:00Z", now: "2024-01-15T12:30:00Z", missedAfter: time.Minute,
			wantLast: "2024-01-15T12:00:00Z", wantWait: 30 * time.Minute},
		{name: "RunOnStartOncePerTerm", s: hourly, opts: pgqueue.PeriodicJobOpts{RunOnStart: true},
			last: "2024-01-15T12:00:00Z", now: "2024-01-15T12:30:00Z", startTerm: &term5,
			wantLast: "2024-01-15T12:00:00Z", wantWait: 30 * time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			limit := tt.limit
			if limit == 0 {
				limit = 100
			}
			missedAfter := tt.missedAfter
			if missedAfter == 0 {
				missedAfter = time.Minute
			}
			runs, last, wait := pgqueue.PlanPeriodic(tt.s, tt.opts, mustTime(t, tt.last), tt.startTerm, mustTime(t, tt.now), 5, missedAfter, limit)
			if len(runs) != len(tt.want) {
				t.Fatalf("runs %v, want %v", runs, tt.want)
			}
			for i, r := range runs {
				if !r.Instant.Equal(mustTime(t, tt.want[i].at)) || r.Kind != tt.want[i].kind {
					t.Errorf("run %d: %s %s, want %s %s", i, r.Instant, r.Kind, tt.want[i].at, tt.want[i].kind)
				}
			}
			if !last.Equal(mustTime(t, tt.wantLast)) || wait != tt.wantWait {
				t.Errorf("last %s, wait %s; want %s, %s", last, wait, tt.wantLast, tt.wantWait)
			}
		})
	}

	t.Run("RunOnStartInANewTerm", func(t *testing.T) {
		t.Parallel()
		now := mustTime(t, "2024-01-15T12:30:00Z")
		term4 := int64(4)
		for _, startTerm := range []*int64{nil, &term4} {
			runs, _, _ := pgqueue.PlanPeriodic(hourly, pgqueue.PeriodicJobOpts{RunOnStart: true}, mustTime(t, "2024-01-15T12:00:00Z"), startTerm, now, 5, time.Minute, 100)
			if len(runs) != 1 || runs[0].Kind != "start" || !runs[0].Instant.Equal(now) {
				t.Errorf("start term %v: runs %v, want one start run at %s", startTerm, runs, now)
			}
		}
	})
}
