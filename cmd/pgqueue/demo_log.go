package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
)

// demoLog takes the library's log during the demo: records at warn level
// and above go to a file, counted by level and message, so that the
// progress table stays readable and the end can say what was logged. The
// demo's own failures are planned, and each discarded job is a warning.
type demoLog struct {
	path  string
	file  *os.File
	inner slog.Handler
	tally *logTally
}

// logTally counts records by level and message, in order of first sight.
type logTally struct {
	mu    sync.Mutex
	order []string
	n     map[string]int
}

// demoLogDir is where the log files go; "" is the temporary directory.
// The tests set it to a directory they remove.
var demoLogDir = ""

// newDemoLog creates the log file in demoLogDir.
func newDemoLog() (*demoLog, error) {
	f, err := os.CreateTemp(demoLogDir, "pgqueue-demo-*.log")
	if err != nil {
		return nil, fmt.Errorf("create the demo's log file: %w", err)
	}
	return &demoLog{
		path:  f.Name(),
		file:  f,
		inner: slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelWarn}),
		tally: &logTally{n: map[string]int{}},
	}, nil
}

// logger returns the logger to give the client.
func (l *demoLog) logger() *slog.Logger { return slog.New(l) }

func (l *demoLog) Enabled(ctx context.Context, level slog.Level) bool {
	return l.inner.Enabled(ctx, level)
}

func (l *demoLog) Handle(ctx context.Context, r slog.Record) error {
	key := r.Level.String() + "  " + r.Message
	l.tally.mu.Lock()
	if l.tally.n[key] == 0 {
		l.tally.order = append(l.tally.order, key)
	}
	l.tally.n[key]++
	l.tally.mu.Unlock()
	return l.inner.Handle(ctx, r)
}

func (l *demoLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *l
	c.inner = l.inner.WithAttrs(attrs)
	return &c
}

func (l *demoLog) WithGroup(name string) slog.Handler {
	c := *l
	c.inner = l.inner.WithGroup(name)
	return &c
}

// close closes the file and writes the counts and the file's path to w;
// with nothing logged it removes the file and says so.
func (l *demoLog) close(w io.Writer) error {
	if err := l.file.Close(); err != nil {
		return err
	}
	l.tally.mu.Lock()
	defer l.tally.mu.Unlock()
	if len(l.tally.order) == 0 {
		fmt.Fprintln(w, "library log: nothing at warn level or above")
		return os.Remove(l.path)
	}
	total := 0
	for _, n := range l.tally.n {
		total += n
	}
	fmt.Fprintf(w, "library log: %d records at warn level or above, in %s:\n", total, l.path)
	for _, key := range l.tally.order {
		fmt.Fprintf(w, "  %6d  %s\n", l.tally.n[key], key)
	}
	return nil
}
