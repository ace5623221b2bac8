// Package warnlog is the logger pgqueue uses when none is configured:
// slog.Default(), but only its warnings and errors. A library should not
// fill its user's logs with Info records nobody asked for (database/sql
// logs nothing at all); a warning or an error is something an operator
// needs to see even then.
package warnlog

import (
	"context"
	"log/slog"
)

// Default returns a logger that passes records at slog.LevelWarn and
// above to the handler slog.Default() has now, and drops the others.
func Default() *slog.Logger {
	return slog.New(handler{slog.Default().Handler()})
}

type handler struct{ next slog.Handler }

func (h handler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn && h.next.Enabled(ctx, level)
}

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	return h.next.Handle(ctx, r)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return handler{h.next.WithAttrs(attrs)}
}

func (h handler) WithGroup(name string) slog.Handler {
	return handler{h.next.WithGroup(name)}
}
