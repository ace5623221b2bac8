package pgqueue_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// lockedBuffer is an io.Writer for a handler several goroutines log to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A client with no Logger writes no Info or Debug record to the process's
// default logger, as a library should, but still its warnings. Not
// parallel: it swaps slog.Default, and parallel tests run only after it.
func TestDefaultLoggerQuiet(t *testing.T) {
	var buf lockedBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })

	pool := newPool(t)
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(context.Context, *pgqueue.Job[noteArgs]) error {
		return errors.New("fails") // attempt 1 retried (Info), attempt 2 discarded (Warn)
	}, nil))
	c := newClient(t, pool, &pgqueue.Config{
		Workers:           ws,
		Queues:            map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 1}},
		FetchPollInterval: 50 * time.Millisecond,
		RetryPolicy:       pgqueue.RetryPolicyFunc(func(int, error) time.Duration { return 0 }),
	})
	must(t, c.Start(t.Context()))
	res, err := c.Enqueue(t.Context(), noteArgs{}, &pgqueue.EnqueueOpts{MaxAttempts: 2})
	must(t, err)
	waitState(t, pool, res.ID, "discarded")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	must(t, c.Stop(ctx))

	got := buf.String()
	for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
		if strings.Contains(line, "level=INFO") || strings.Contains(line, "level=DEBUG") {
			t.Errorf("written with no Logger configured: %s", line)
		}
	}
	if !strings.Contains(got, "level=WARN") || !strings.Contains(got, "discarded") {
		t.Errorf("the discarded job's warning is missing:\n%s", got)
	}
}
