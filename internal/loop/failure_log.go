package loop

import (
	"context"
	"log/slog"
	"time"
)

// FailureLog logs a failure that repeats at every round of a loop (a poll
// while the database is down): when it starts, then at most once per
// Every with the count, and once when it ends. A server restarting for a
// minute is then a few lines, not one per round. One goroutine uses it.
type FailureLog struct {
	log   *slog.Logger
	msg   string // "pgqueue: poll failed"
	okMsg string // "pgqueue: poll succeeds again"
	// Every is how often a failure that goes on is logged again:
	// FailureLogEvery by default.
	Every time.Duration
	// Now is time.Now; tests set it.
	Now func() time.Time

	failures int // since the last success
	since    time.Time
	logged   time.Time // when the last failure line was written
}

// FailureLogEvery is how often a failure that goes on is logged again.
const FailureLogEvery = 30 * time.Second

// NewFailureLog returns a FailureLog that writes msg at ERROR for
// failures and okMsg at INFO when they end.
func NewFailureLog(log *slog.Logger, msg, okMsg string) *FailureLog {
	return &FailureLog{log: log, msg: msg, okMsg: okMsg, Every: FailureLogEvery, Now: time.Now}
}

// Failed records a failed round and logs it when it starts a run of
// failures or Every has passed since the last line.
func (f *FailureLog) Failed(ctx context.Context, err error) {
	now := f.Now()
	f.failures++
	if f.failures == 1 {
		f.since, f.logged = now, now
		f.log.ErrorContext(ctx, f.msg, "err", err)
		return
	}
	if now.Sub(f.logged) >= f.Every {
		f.logged = now
		f.log.ErrorContext(ctx, f.msg+" (still)", "err", err, "failures", f.failures, "since", f.since)
	}
}

// Succeeded records a successful round, and says so when it ends a run
// of failures.
func (f *FailureLog) Succeeded(ctx context.Context) {
	if f.failures == 0 {
		return
	}
	f.log.InfoContext(ctx, f.okMsg, "failures", f.failures, "for", f.Now().Sub(f.since).Round(time.Millisecond))
	f.failures = 0
}
