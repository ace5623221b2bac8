package bench

import (
	"io"
	"log/slog"
)

type slogLogger = slog.Logger

func newQuietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError + 1}))
}
