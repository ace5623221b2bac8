package loop_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue/internal/loop"
)

// A failure at every poll for a minute and a half is four lines: its
// start, two reminders 30 s apart with the count, and its end.
func TestFailureLogThrottlesRepeats(t *testing.T) {
	var out bytes.Buffer
	f := loop.NewFailureLog(slog.New(slog.NewTextHandler(&out, nil)), "pgqueue: poll failed", "pgqueue: poll succeeds again")
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	f.Now = func() time.Time { return now }
	ctx := t.Context()
	f.Succeeded(ctx) // nothing to say
	for range 450 {  // 90 s of polls every 200 ms
		f.Failed(ctx, errors.New("connection refused"))
		now = now.Add(200 * time.Millisecond)
	}
	f.Succeeded(ctx)
	f.Succeeded(ctx)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), out.String())
	}
	for i, want := range []string{`msg="pgqueue: poll failed" err="connection refused"`, `msg="pgqueue: poll failed (still)" err="connection refused" failures=151`, "failures=301",
		`msg="pgqueue: poll succeeds again" failures=450 for=1m30s`} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d: %s\nwant it to contain %s", i, lines[i], want)
		}
	}
	// A new run of failures is logged at once again.
	f.Failed(ctx, errors.New("again"))
	if !strings.Contains(out.String(), `err=again`) {
		t.Errorf("a new failure after recovery was not logged:\n%s", out.String())
	}
}
