package pgqueue_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testlog"
)

// errorHandlerFunc is an ErrorHandler made of two functions; a nil one
// decides nothing.
type errorHandlerFunc struct {
	onError func(ctx context.Context, job *pgqueue.JobRow, err error) *pgqueue.ErrorDecision
	onPanic func(ctx context.Context, job *pgqueue.JobRow, value any, stack string) *pgqueue.ErrorDecision
}

func (h errorHandlerFunc) HandleError(ctx context.Context, job *pgqueue.JobRow, err error) *pgqueue.ErrorDecision {
	if h.onError == nil {
		return nil
	}
	return h.onError(ctx, job, err)
}

func (h errorHandlerFunc) HandlePanic(ctx context.Context, job *pgqueue.JobRow, value any, stack string) *pgqueue.ErrorDecision {
	if h.onPanic == nil {
		return nil
	}
	return h.onPanic(ctx, job, value, stack)
}

// TestErrorHandler checks when the error handler is called, with what, and
// that its decision is applied.
func TestErrorHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	errPermanent := errors.New("permanent")

	t.Run("DiscardsOnError", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			if job.Args.N == 1 {
				return errPermanent
			}
			return errors.New("transient")
		}, nil))
		type call struct {
			id        int64
			err       error
			hasClient bool
		}
		calls := make(chan call, 10)
		b := startClient(t, pool, ws, &pgqueue.Config{
			RetryPolicy: pgqueue.RetryPolicyFunc(func(int, error) time.Duration { return time.Hour }),
			ErrorHandler: errorHandlerFunc{
				onError: func(ctx context.Context, job *pgqueue.JobRow, err error) *pgqueue.ErrorDecision {
					calls <- call{job.ID, err, pgqueue.ClientFromContext(ctx) != nil}
					return &pgqueue.ErrorDecision{Discard: errors.Is(err, errPermanent)}
				},
			},
		})
		permanent, err := b.client.Enqueue(ctx, noteArgs{N: 1}, &pgqueue.EnqueueOpts{MaxAttempts: 5})
		must(t, err)
		s := waitState(t, pool, permanent.ID, "discarded")
		if s.attempt != 1 || len(s.errors) != 1 || s.errors[0] != "permanent" {
			t.Fatalf("attempt %d errors %q", s.attempt, s.errors)
		}
		if c := <-calls; c.id != permanent.ID || !errors.Is(c.err, errPermanent) || !c.hasClient {
			t.Fatalf("handler called with %+v", c)
		}
		// Nil decision: the retry policy applies.
		transient, err := b.client.Enqueue(ctx, noteArgs{N: 2}, &pgqueue.EnqueueOpts{MaxAttempts: 5})
		must(t, err)
		s = waitState(t, pool, transient.ID, "scheduled")
		if time.Until(s.runAt) < 50*time.Minute {
			t.Fatalf("run_at %s: retry policy's hour not applied", s.runAt)
		}
		if c := <-calls; c.id != transient.ID {
			t.Fatalf("handler called with %+v", c)
		}
	})

	t.Run("PanicWithStackAndRetryDelay", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			panic("handler exploded")
		}, nil))
		type call struct {
			value any
			stack string
		}
		calls := make(chan call, 1)
		b := startClient(t, pool, ws, &pgqueue.Config{
			ErrorHandler: errorHandlerFunc{
				onError: func(ctx context.Context, job *pgqueue.JobRow, err error) *pgqueue.ErrorDecision {
					t.Errorf("HandleError called for a panic: %v", err)
					return nil
				},
				onPanic: func(ctx context.Context, job *pgqueue.JobRow, value any, stack string) *pgqueue.ErrorDecision {
					calls <- call{value, stack}
					return &pgqueue.ErrorDecision{RetryDelay: 2 * time.Hour}
				},
			},
		})
		res, err := b.client.Enqueue(ctx, noteArgs{}, &pgqueue.EnqueueOpts{MaxAttempts: 5})
		must(t, err)
		s := waitState(t, pool, res.ID, "scheduled")
		c := <-calls
		if c.value != "handler exploded" || !strings.Contains(c.stack, "error_handler_test.go") {
			t.Fatalf("HandlePanic got %v and stack %q", c.value, c.stack)
		}
		if d := time.Until(s.runAt); d < 110*time.Minute || d > 2*time.Hour {
			t.Fatalf("run_at in %s, want the handler's 2h", d)
		}
		if len(s.traces) != 1 || !strings.Contains(s.traces[0], "error_handler_test.go") {
			t.Fatalf("traces %q", s.traces)
		}
	})

	t.Run("NotCalledUnlessTheAttemptFailed", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			switch job.Args.N {
			case 1:
				return pgqueue.JobSnooze(time.Hour)
			case 2:
				return pgqueue.JobCancel(nil)
			}
			return nil
		}, nil))
		var mu sync.Mutex
		var called []int64
		record := func(job *pgqueue.JobRow) {
			mu.Lock()
			called = append(called, job.ID)
			mu.Unlock()
		}
		b := startClient(t, pool, ws, &pgqueue.Config{ErrorHandler: errorHandlerFunc{
			onError: func(_ context.Context, job *pgqueue.JobRow, _ error) *pgqueue.ErrorDecision { record(job); return nil },
			onPanic: func(_ context.Context, job *pgqueue.JobRow, _ any, _ string) *pgqueue.ErrorDecision {
				record(job)
				return nil
			},
		}})
		ids := map[string]int64{}
		for n, state := range map[int]string{0: "completed", 1: "scheduled", 2: "cancelled"} {
			res, err := b.client.Enqueue(ctx, noteArgs{N: n}, nil)
			must(t, err)
			waitState(t, pool, res.ID, state)
			ids[state] = res.ID
		}
		mu.Lock()
		defer mu.Unlock()
		if len(called) != 0 {
			t.Fatalf("error handler called for jobs %v (%v)", called, ids)
		}
	})

	t.Run("PanickingHandlerDecidesNothing", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			return errors.New("failed")
		}, nil))
		b := startClient(t, pool, ws, &pgqueue.Config{
			Logger: testlog.Discard(),
			ErrorHandler: errorHandlerFunc{onError: func(context.Context, *pgqueue.JobRow, error) *pgqueue.ErrorDecision {
				panic("error handler exploded")
			}},
		})
		res, err := b.client.Enqueue(ctx, noteArgs{}, &pgqueue.EnqueueOpts{MaxAttempts: 2})
		must(t, err)
		s := waitState(t, pool, res.ID, "discarded")
		if s.attempt != 2 || len(s.errors) != 2 {
			t.Fatalf("attempt %d errors %q: want both attempts run", s.attempt, s.errors)
		}
	})
}
