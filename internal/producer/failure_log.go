package producer

import (
	"context"
	"log/slog"
	"time"
)

// failureLog logs a failure that repeats at every round of a loop (a poll
// while the database is down): when it starts, then at most once per
// every with the count, and once when it ends. A server restarting for a
// minute is then a few lines, not one per poll. One goroutine uses it.
type failureLog struct {
	log   *slog.Logger
	msg   string // "pgqueue: poll failed"
	okMsg string // "pgqueue: poll succeeds again"
	every time.Duration
	now   func() time.Time // time.Now; tests set it

	failures int // since the last success
	since    time.Time
	logged   time.Time // when the last failure line was written
}

// failureLogEvery is how often a failure that goes on is logged again.
const failureLogEvery = 30 * time.Second

func newFailureLog(log *slog.Logger, msg, okMsg string) *failureLog {
	return &failureLog{log: log, msg: msg, okMsg: okMsg, every: failureLogEvery, now: time.Now}
}

// failed records a failed round and logs it when it starts a run of
// failures or every has passed since the last line.
func (f *failureLog) failed(ctx context.Context, err error) {
	now := f.now()
	f.failures++
	if f.failures == 1 {
		f.since, f.logged = now, now
		f.log.ErrorContext(ctx, f.msg, "err", err)
		return
	}
	if now.Sub(f.logged) >= f.every {
		f.logged = now
		f.log.ErrorContext(ctx, f.msg+" (still)", "err", err, "failures", f.failures, "since", f.since)
	}
}

// succeeded records a successful round, and says so when it ends a run
// of failures.
func (f *failureLog) succeeded(ctx context.Context) {
	if f.failures == 0 {
		return
	}
	f.log.InfoContext(ctx, f.okMsg, "failures", f.failures, "for", f.now().Sub(f.since).Round(time.Millisecond))
	f.failures = 0
}
