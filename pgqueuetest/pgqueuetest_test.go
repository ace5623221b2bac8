package pgqueuetest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/pgqueuetest"
)

func TestMain(m *testing.M) {
	code := pgqueuetest.Main(m, nil)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

type orderArgs struct {
	Customer int    `json:"customer"`
	Item     string `json:"item"`
	Mode     string `json:"mode,omitempty"`
}

func (orderArgs) Kind() string { return "order" }

// fatalTB records a Fatalf and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// failure runs check with a TB that records its failure, and returns the
// message, "" when check passed.
func failure(t *testing.T, check func(tb testing.TB)) string {
	t.Helper()
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(tb)
	}()
	<-done
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.msg
}

func TestRequireEnqueued(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgqueuetest.NewPool(t)
	client, err := pgqueue.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	for _, e := range []struct {
		args orderArgs
		opts *pgqueue.EnqueueOpts
	}{
		{orderArgs{Customer: 1, Item: "tea"}, nil},
		{orderArgs{Customer: 2, Item: "tea"}, &pgqueue.EnqueueOpts{Queue: "slow", Priority: 3, RunAt: at, MaxAttempts: 4, Tags: []string{"vip", "eu"}}},
		{orderArgs{Customer: 2, Item: "cake"}, &pgqueue.EnqueueOpts{Unique: &pgqueue.UniqueOpts{ByArgs: true}}},
	} {
		if _, err := client.Enqueue(ctx, e.args, e.opts); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("ByArgsSubsetAndOptions", func(t *testing.T) {
		j := pgqueuetest.RequireEnqueued(ctx, t, pool, orderArgs{}, &pgqueuetest.Match{
			Args: map[string]any{"customer": 2, "item": "tea"}, Queue: "slow", Priority: pgqueuetest.Ptr[int16](3),
			ScheduledAt: at, MaxAttempts: 4, Tags: []string{"vip"}, State: pgqueue.StateScheduled,
		})
		if j.Queue != "slow" || j.Unique {
			t.Errorf("got %+v", j.JobRow)
		}
		pgqueuetest.RequireEnqueued(ctx, t, pool, orderArgs{}, &pgqueuetest.Match{Args: map[string]any{"item": "cake"}, Unique: pgqueuetest.Ptr(true)})
		pgqueuetest.RequireEnqueuedN(ctx, t, pool, orderArgs{}, &pgqueuetest.Match{Args: map[string]any{"item": "tea"}}, 2)
		pgqueuetest.RequireEnqueuedN(ctx, t, pool, orderArgs{}, nil, 3)
		pgqueuetest.RequireNotEnqueued(ctx, t, pool, orderArgs{}, &pgqueuetest.Match{Args: map[string]any{"customer": 3}})
	})

	t.Run("FailuresSayWhy", func(t *testing.T) {
		msg := failure(t, func(tb testing.TB) {
			pgqueuetest.RequireEnqueued(ctx, tb, pool, orderArgs{}, &pgqueuetest.Match{Args: map[string]any{"customer": 2}, Queue: "fast"})
		})
		if !strings.Contains(msg, `0 jobs of kind "order" match {args ⊇ {"customer":2}, queue "fast"}, want 1`) ||
			!strings.Contains(msg, `(queue "slow")`) || !strings.Contains(msg, `(queue "default")`) {
			t.Errorf("message: %s", msg)
		}
		msg = failure(t, func(tb testing.TB) {
			pgqueuetest.RequireEnqueued(ctx, tb, pool, orderArgs{}, &pgqueuetest.Match{Args: map[string]any{"item": "tea"}})
		})
		if !strings.Contains(msg, "2 jobs of kind") {
			t.Errorf("message: %s", msg)
		}
		msg = failure(t, func(tb testing.TB) {
			pgqueuetest.RequireNotEnqueued(ctx, tb, pool, orderArgs{}, &pgqueuetest.Match{Priority: pgqueuetest.Ptr[int16](3)})
		})
		if !strings.Contains(msg, "1 jobs of kind \"order\" match {priority 3}, want none") {
			t.Errorf("message: %s", msg)
		}
		msg = failure(t, func(tb testing.TB) {
			pgqueuetest.RequireEnqueued(ctx, tb, pool, orderArgs{}, &pgqueuetest.Match{ScheduledAt: at.Add(time.Minute)})
		})
		if !strings.Contains(msg, "scheduled at") {
			t.Errorf("message: %s", msg)
		}
	})

	t.Run("InsideATransaction", func(t *testing.T) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		if _, err := client.EnqueueTx(ctx, tx, orderArgs{Customer: 9, Item: "pie"}, nil); err != nil {
			t.Fatal(err)
		}
		match := &pgqueuetest.Match{Args: map[string]any{"customer": 9}}
		pgqueuetest.RequireEnqueued(ctx, t, tx, orderArgs{}, match)
		pgqueuetest.RequireNotEnqueued(ctx, t, pool, orderArgs{}, match) // not committed
	})
}

func TestWorkJob(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgqueuetest.NewPool(t)
	var middlewareSaw []string
	var mu sync.Mutex
	errBoom := errors.New("boom")
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[orderArgs]) error {
		switch job.Args.Mode {
		case "fail":
			return fmt.Errorf("charge: %w", errBoom)
		case "snooze":
			return pgqueue.JobSnooze(time.Hour)
		case "cancel":
			return pgqueue.JobCancel(errors.New("out of stock"))
		case "panic":
			panic("no tea")
		case "permanent":
			return errPermanent
		case "tx":
			c := pgqueue.ClientFromContext(ctx)
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(context.WithoutCancel(ctx))
			if err := c.CompleteTx(ctx, tx, job.JobRow); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}
		return pgqueue.RecordOutput(ctx, map[string]any{"shipped": job.Args.Item})
	}, nil); err != nil {
		t.Fatal(err)
	}
	client, err := pgqueue.New(pool, &pgqueue.Config{
		Workers: workers,
		WorkMiddleware: []pgqueue.WorkMiddleware{pgqueue.WorkMiddlewareFunc(func(ctx context.Context, job *pgqueue.JobRow, next func(context.Context) error) error {
			err := next(ctx)
			mu.Lock()
			middlewareSaw = append(middlewareSaw, string(pgqueue.OutcomeOf(ctx, err)))
			mu.Unlock()
			return err
		})},
		ErrorHandler: discardPermanent{},
		RetryPolicy:  pgqueue.RetryPolicyFunc(func(int, error) time.Duration { return time.Minute }),
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("Completed", func(t *testing.T) {
		r := pgqueuetest.Work(ctx, t, client, orderArgs{Item: "tea"}, &pgqueue.EnqueueOpts{Queue: "nobody-works-it", RunAt: time.Now().Add(time.Hour)})
		if r.Result != pgqueue.OutcomeCompleted || r.Err != nil || r.Job.State != pgqueue.StateCompleted || string(r.Job.Output) != `{"shipped": "tea"}` {
			t.Errorf("got %s, %v, %s, output %s", r.Result, r.Err, r.Job.State, r.Job.Output)
		}
	})
	t.Run("RetriedWithItsError", func(t *testing.T) {
		r := pgqueuetest.Work(ctx, t, client, orderArgs{Mode: "fail"}, nil)
		if r.Result != pgqueue.OutcomeRetried || !errors.Is(r.Err, errBoom) || r.Job.State != pgqueue.StateScheduled ||
			len(r.Job.Errors) != 1 || r.Job.Errors[0].Error != "charge: boom" || time.Until(r.Job.RunAt) < 30*time.Second {
			t.Errorf("got %s, %v, %s, %+v, run at %s", r.Result, r.Err, r.Job.State, r.Job.Errors, r.Job.RunAt)
		}
		// The next attempt runs at once when asked, and the last discards.
		r = pgqueuetest.WorkJob(ctx, t, client, r.Job.ID)
		if r.Result != pgqueue.OutcomeRetried || r.Job.Attempt != 2 {
			t.Errorf("second attempt: %s, attempt %d", r.Result, r.Job.Attempt)
		}
	})
	t.Run("DiscardedAtMaxAttempts", func(t *testing.T) {
		r := pgqueuetest.Work(ctx, t, client, orderArgs{Mode: "fail"}, &pgqueue.EnqueueOpts{MaxAttempts: 1})
		if r.Result != pgqueue.OutcomeDiscarded || r.Job.State != pgqueue.StateDiscarded {
			t.Errorf("got %s, %s", r.Result, r.Job.State)
		}
	})
	t.Run("DiscardedByTheErrorHandler", func(t *testing.T) {
		r := pgqueuetest.Work(ctx, t, client, orderArgs{Mode: "permanent"}, nil)
		if r.Result != pgqueue.OutcomeDiscarded || !errors.Is(r.Err, errPermanent) {
			t.Errorf("got %s, %v", r.Result, r.Err)
		}
	})
	t.Run("Snoozed", func(t *testing.T) {
		r := pgqueuetest.Work(ctx, t, client, orderArgs{Mode: "snooze"}, nil)
		if r.Result != pgqueue.OutcomeSnoozed || r.Job.State != pgqueue.StateScheduled || r.Job.Attempt != 0 {
			t.Errorf("got %s, %s, attempt %d", r.Result, r.Job.State, r.Job.Attempt)
		}
	})
	t.Run("Cancelled", func(t *testing.T) {
		r := pgqueuetest.Work(ctx, t, client, orderArgs{Mode: "cancel"}, nil)
		if r.Result != pgqueue.OutcomeCancelled || r.Job.State != pgqueue.StateCancelled {
			t.Errorf("got %s, %s", r.Result, r.Job.State)
		}
	})
	t.Run("Panicked", func(t *testing.T) {
		r := pgqueuetest.Work(ctx, t, client, orderArgs{Mode: "panic"}, nil)
		pe, ok := errors.AsType[*pgqueue.PanicError](r.Err)
		if r.Result != pgqueue.OutcomeRetried || !ok || pe.Value != "no tea" || r.Job.Errors[0].Trace == "" {
			t.Errorf("got %s, %v, %+v", r.Result, r.Err, r.Job.Errors)
		}
	})
	t.Run("CompleteTx", func(t *testing.T) {
		r := pgqueuetest.Work(ctx, t, client, orderArgs{Mode: "tx"}, nil)
		if r.Result != pgqueue.OutcomeCompleted || r.Err != nil || r.Job.State != pgqueue.StateCompleted {
			t.Errorf("got %s, %v, %s", r.Result, r.Err, r.Job.State)
		}
	})
	t.Run("UnknownKindSnoozed", func(t *testing.T) {
		res, err := client.Enqueue(ctx, otherArgs{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := pgqueuetest.WorkJob(ctx, t, client, res.ID)
		if r.Result != pgqueue.OutcomeSnoozed || r.Err != nil {
			t.Errorf("got %s, %v", r.Result, r.Err)
		}
	})
	t.Run("NotWaiting", func(t *testing.T) {
		r := pgqueuetest.Work(ctx, t, client, orderArgs{}, nil)
		msg := failure(t, func(tb testing.TB) { pgqueuetest.WorkJob(ctx, tb, client, r.Job.ID) })
		if !strings.Contains(msg, pgqueue.ErrJobNotFound.Error()) {
			t.Errorf("message: %s", msg)
		}
	})

	mu.Lock()
	defer mu.Unlock()
	if len(middlewareSaw) != 10 {
		t.Errorf("work middleware ran %d times (%v), want 10", len(middlewareSaw), middlewareSaw)
	}
}

type otherArgs struct{}

func (otherArgs) Kind() string { return "other" }

var errPermanent = errors.New("permanent")

type discardPermanent struct{}

func (discardPermanent) HandleError(_ context.Context, _ *pgqueue.JobRow, err error) *pgqueue.ErrorDecision {
	return &pgqueue.ErrorDecision{Discard: errors.Is(err, errPermanent)}
}

func (discardPermanent) HandlePanic(context.Context, *pgqueue.JobRow, any, string) *pgqueue.ErrorDecision {
	return nil
}

// The tests of the whole-file Example (example_test.go) run here: an
// example file with a test function is not shown whole.
func TestExample(t *testing.T) {
	t.Parallel()
	t.Run("SignUpEnqueuesWelcome", testSignUpEnqueuesWelcome)
	t.Run("WelcomeHandler", testWelcomeHandler)
}
