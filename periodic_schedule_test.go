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

// TestCronScheduleDST checks the instants of cron expressions in zones
// with daylight saving time, across the changes of 2026: Europe/Berlin
// skips 02:00-03:00 on March 29th and repeats 02:00-03:00 on October
// 25th; America/New_York skips 02:00-03:00 on March 8th and repeats
// 01:00-02:00 on November 1st.
func TestCronScheduleDST(t *testing.T) {
	t.Parallel()
	const (
		berlin = "CRON_TZ=Europe/Berlin "
		ny     = "CRON_TZ=America/New_York "
	)
	once, strict := &pgqueue.CronOpts{DST: pgqueue.DSTOnce}, &pgqueue.CronOpts{DST: pgqueue.DSTStrict}
	for _, tt := range []struct {
		name  string
		expr  string
		opts  *pgqueue.CronOpts
		after string
		want  []string
	}{
		// Berlin, spring: 02:00 CET is 01:00Z, which reads 03:00 CEST.
		{"SkippedTimeRunsAtTheGapsEnd", berlin + "0 30 2 * * *", nil, "2026-03-28T22:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"SkippedTimeOnceIsTheDefault", berlin + "0 30 2 * * *", once, "2026-03-28T22:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"StrictSkipsTheDay", berlin + "0 30 2 * * *", strict, "2026-03-28T22:00:00Z",
			[]string{"2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"}},
		{"FiveFieldsToo", berlin + "30 2 * * *", nil, "2026-03-28T22:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"GapStartIsSkipped", berlin + "0 0 2 * * *", nil, "2026-03-28T22:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z"}},
		{"SkippedTimesRunOnceTogether", berlin + "0 0,30 2 * * *", nil, "2026-03-28T22:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z", "2026-03-30T00:30:00Z"}},
		{"SkippedAndGapEndRunOnce", berlin + "0 30 2,3 * * *", nil, "2026-03-29T00:59:59Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z", "2026-03-30T00:30:00Z"}},
		{"TimeAfterTheGapUnchanged", berlin + "0 0 3 * * *", nil, "2026-03-28T22:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T01:00:00Z"}},
		{"TimeBeforeTheGapUnchanged", berlin + "0 30 1 * * *", nil, "2026-03-28T22:00:00Z",
			[]string{"2026-03-29T00:30:00Z", "2026-03-29T23:30:00Z"}},
		{"FromTheGapsEndNotAgain", berlin + "0 30 2 * * *", nil, "2026-03-29T01:00:00Z",
			[]string{"2026-03-30T00:30:00Z"}},
		{"HourlyByTheNewClock", berlin + "0 0 * * * *", nil, "2026-03-29T00:30:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"}},
		{"DescriptorHourlyByTheNewClock", berlin + "@hourly", nil, "2026-03-29T00:30:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"}},
		{"MinutelyAcrossTheGap", berlin + "0 * * * * *", nil, "2026-03-29T00:58:30Z",
			[]string{"2026-03-29T00:59:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:01:00Z"}},
		{"WildMinutesInTheGapDoNotRun", berlin + "0 */15 2 * * *", nil, "2026-03-28T23:00:00Z",
			[]string{"2026-03-30T00:00:00Z", "2026-03-30T00:15:00Z"}},
		// Berlin, autumn: 02:00-02:59 is CEST (00:00Z-00:59Z), then CET
		// (01:00Z-01:59Z).
		{"RepeatedTimeRunsOnce", berlin + "0 30 2 * * *", nil, "2026-10-24T22:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"StrictRunsTwice", berlin + "0 30 2 * * *", strict, "2026-10-24T22:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z"}},
		{"RepeatedFromTheFirstPassBefore", berlin + "0 30 2 * * *", nil, "2026-10-25T00:10:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"RepeatedFromTheFirstPassAfter", berlin + "0 30 2 * * *", nil, "2026-10-25T00:45:00Z",
			[]string{"2026-10-26T01:30:00Z"}},
		{"RepeatedFromTheSecondPass", berlin + "0 30 2 * * *", nil, "2026-10-25T01:10:00Z",
			[]string{"2026-10-26T01:30:00Z"}},
		{"RepeatedFromTheInstantItself", berlin + "0 30 2 * * *", nil, "2026-10-25T00:30:00Z",
			[]string{"2026-10-26T01:30:00Z"}},
		{"RepeatedHourStart", berlin + "0 0 2 * * *", nil, "2026-10-24T22:00:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-26T01:00:00Z"}},
		{"RepeatedEveryMinuteOfTheHourOnce", berlin + "0 0-59 2 * * *", nil, "2026-10-25T00:58:30Z",
			[]string{"2026-10-25T00:59:00Z", "2026-10-26T01:00:00Z"}},
		{"AfterTheRepetitionUnchanged", berlin + "0 0 3 * * *", nil, "2026-10-24T22:00:00Z",
			[]string{"2026-10-25T02:00:00Z", "2026-10-26T02:00:00Z"}},
		{"HourlyRunsBothHours", berlin + "0 0 * * * *", nil, "2026-10-24T23:30:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"}},
		{"HourlyAtQuarterPast", berlin + "0 15 * * * *", nil, "2026-10-25T00:45:00Z",
			[]string{"2026-10-25T01:15:00Z", "2026-10-25T02:15:00Z"}},
		{"WildMinutesInTheRepetitionRunTwice", berlin + "0 */30 2 * * *", nil, "2026-10-24T22:00:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z", "2026-10-26T01:00:00Z"}},
		// New York: 02:00 EST is 07:00Z, which reads 03:00 EDT; 01:00-01:59
		// is EDT (05:00Z-05:59Z), then EST (06:00Z-06:59Z).
		{"NewYorkSkipped", ny + "0 30 2 * * *", nil, "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"NewYorkSkippedStrict", ny + "0 30 2 * * *", strict, "2026-03-07T12:00:00Z",
			[]string{"2026-03-09T06:30:00Z"}},
		{"NewYorkRepeated", ny + "0 30 1 * * *", nil, "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"NewYorkRepeatedStrict", ny + "0 30 1 * * *", strict, "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"}},
		{"NewYorkHourly", ny + "@hourly", nil, "2026-11-01T04:30:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"}},
		{"NewYorkDaily", ny + "@daily", nil, "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"}},
		{"UTCHasNoChanges", "0 30 2 * * *", nil, "2026-03-28T22:00:00Z",
			[]string{"2026-03-29T02:30:00Z", "2026-03-30T02:30:00Z"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := pgqueue.NewCronSchedule(tt.expr, tt.opts)
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

	// PlanPeriodic finds the latest missed instant by halving a span of
	// time, which needs Next to never go back as its argument grows.
	t.Run("NextNeverGoesBack", func(t *testing.T) {
		t.Parallel()
		for _, expr := range []string{berlin + "0 30 2 * * *", berlin + "0 0,30 2 * * *", berlin + "0 0-59 2 * * *", ny + "0 30 1 * * *", berlin + "0 0 * * * *"} {
			for _, day := range []string{"2026-03-28T20:00:00Z", "2026-10-24T20:00:00Z", "2026-03-07T20:00:00Z", "2026-10-31T20:00:00Z"} {
				s, err := pgqueue.CronSchedule(expr)
				must(t, err)
				var prev time.Time
				for at, end := mustTime(t, day), mustTime(t, day).Add(12*time.Hour); at.Before(end); at = at.Add(17 * time.Second) {
					next := s.Next(at)
					if !next.After(at) || next.Before(prev) {
						t.Fatalf("%q: Next(%s) = %s, after Next of an earlier time gave %s", expr, at, next, prev)
					}
					prev = next
				}
			}
		}
	})

	t.Run("UnknownPolicyIsScheduleError", func(t *testing.T) {
		t.Parallel()
		s, err := pgqueue.NewCronSchedule("0 30 2 * * *", &pgqueue.CronOpts{DST: 7})
		var se *pgqueue.ScheduleError
		if !errors.As(err, &se) || !errors.Is(err, pgqueue.ErrInvalid) || s != nil {
			t.Fatalf("schedule %v, error %v; want a *ScheduleError matching ErrInvalid", s, err)
		}
	})
}
