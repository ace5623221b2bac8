package maintenance

import (
	"testing"
	"time"
)

// scheduleFunc adapts a function to Schedule; it has no String method.
type scheduleFunc func(time.Time) time.Time

func (f scheduleFunc) Next(t time.Time) time.Time { return f(t) }

// named is a schedule with a String method.
type named struct{ scheduleFunc }

func (named) String() string { return "named" }

func TestNextInstant(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2024, 1, 15, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name string
		next func(time.Time) time.Time
		want time.Time
	}{
		{"TruncatedToTheMicrosecond", func(t time.Time) time.Time { return t.Add(time.Second + 999) }, t0.Add(time.Second)},
		{"StuckScheduleHasNone", func(t time.Time) time.Time { return t.Add(999) }, time.Time{}},
		{"EndedScheduleHasNone", func(time.Time) time.Time { return time.Time{} }, time.Time{}},
	} {
		if got := nextInstant(scheduleFunc(tt.next), t0); !got.Equal(tt.want) {
			t.Errorf("%s: got %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestLatestBefore(t *testing.T) {
	t.Parallel()
	minutely := scheduleFunc(func(t time.Time) time.Time { return t.Truncate(time.Minute).Add(time.Minute) })
	after := time.Date(2024, 1, 15, 12, 0, 0, 0, time.UTC)
	cut := after.Add(1000*time.Minute + 3*time.Second)
	if got, want := latestBefore(minutely, after, cut), after.Add(1000*time.Minute); !got.Equal(want) {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestDescribeSchedule(t *testing.T) {
	t.Parallel()
	if got := describeSchedule(named{}); got != "named" {
		t.Errorf("with String: %q", got)
	}
	if got := describeSchedule(scheduleFunc(nil)); got != "maintenance.scheduleFunc" {
		t.Errorf("without String: %q", got)
	}
}
