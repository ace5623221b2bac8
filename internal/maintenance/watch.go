package maintenance

import (
	"context"
	"errors"
	"log/slog"

	"github.com/pgqueue/pgqueue/internal/loop"
	"github.com/pgqueue/pgqueue/internal/schemawatch"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// rounds is what a task's rounds share: the client's schema watch, which
// holds them back (and says so once) while the schema is outdated, and
// the task's failure log, which says any other failure when it starts,
// every 30 s and when it ends. A task that failed at every round logged
// an ERROR each time: dozens a minute while the schema was dropped or the
// database down. One goroutine uses it.
type rounds struct {
	watch *schemawatch.Watch
	fails *loop.FailureLog
}

// newRounds returns the rounds of task ("scheduler") under watch (nil for
// none).
func newRounds(watch *schemawatch.Watch, log *slog.Logger, task string) *rounds {
	return &rounds{watch: watch, fails: loop.NewFailureLog(log, "pgqueue: "+task+" failed", "pgqueue: "+task+" succeeds again")}
}

// held reports that the watch holds statements back: skip the round.
func (r *rounds) held() bool { return r.watch.Blocked() != nil }

// done takes a round's outcome and reports whether it failed. A failure
// of an outdated schema is the watch's to say; one when ctx (the term)
// ended is no failure of the database.
func (r *rounds) done(ctx context.Context, err error) (failed bool) {
	err = r.watch.Observe(ctx, err)
	switch {
	case err == nil:
		r.fails.Succeeded(ctx)
		return false
	case ctx.Err() != nil, errors.Is(err, pgqueuetype.ErrSchemaOutdated):
	default:
		r.fails.Failed(ctx, err)
	}
	return true
}
