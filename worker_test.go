package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

type noteArgs struct {
	N int `json:"n"`
}

func (noteArgs) Kind() string { return "note" }

// workBundle is a started client with its pool.
type workBundle struct {
	pool   *pgxpool.Pool
	client *pgqueue.Client
}

// startClient starts a client working queue "default" with the given workers
// and stops it when the test ends.
func startClient(t *testing.T, pool *pgxpool.Pool, workers *pgqueue.Workers, cfg *pgqueue.Config) *workBundle {
	t.Helper()
	if cfg == nil {
		cfg = &pgqueue.Config{}
	}
	cfg.Workers = workers
	if cfg.Queues == nil {
		cfg.Queues = map[string]pgqueue.QueueConfig{pgqueue.DefaultQueue: {MaxWorkers: 4}}
	}
	if cfg.FetchPollInterval == 0 {
		cfg.FetchPollInterval = 50 * time.Millisecond
	}
	if cfg.SchedulerInterval == 0 {
		cfg.SchedulerInterval = 100 * time.Millisecond
	}
	if cfg.RetryPolicy == nil {
		cfg.RetryPolicy = pgqueue.RetryPolicyFunc(func(int, error) time.Duration { return 0 })
	}
	c := newClient(t, pool, cfg)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Stop(ctx); err != nil && !errors.Is(err, pgqueue.ErrNotStarted) {
			t.Errorf("stop: %v", err)
		}
	})
	return &workBundle{pool: pool, client: c}
}

// jobState reads a job back.
type jobState struct {
	state    string
	attempt  int
	fence    *int64
	errors   []string
	traces   []string
	runAt    time.Time
	attempts *time.Time
}

func readJob(t *testing.T, pool *pgxpool.Pool, id int64) jobState {
	t.Helper()
	var s jobState
	err := pool.QueryRow(context.Background(), `
		SELECT state, attempt, fence, run_at, attempted_at,
		       coalesce((SELECT array_agg(e->>'error') FROM jsonb_array_elements(errors) e), '{}'),
		       coalesce((SELECT array_agg(coalesce(e->>'trace', '')) FROM jsonb_array_elements(errors) e), '{}')
		FROM pgqueue.jobs WHERE id = $1`, id).Scan(&s.state, &s.attempt, &s.fence, &s.runAt, &s.attempts, &s.errors, &s.traces)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitState(t *testing.T, pool *pgxpool.Pool, id int64, want string) jobState {
	t.Helper()
	var s jobState
	waitFor(t, fmt.Sprintf("job %d to be %s", id, want), func() bool {
		s = readJob(t, pool, id)
		return s.state == want
	})
	return s
}

func TestWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("CompletesJobWithFence", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		var seen atomic.Int64
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			if job.Args.N != 7 || job.Attempt != 1 || job.State != pgqueue.StateRunning {
				return fmt.Errorf("unexpected job %+v", job.JobRow)
			}
			seen.Store(job.Fence)
			return nil
		}, nil))
		b := startClient(t, pool, ws, nil)
		row, err := b.client.Enqueue(ctx, noteArgs{N: 7}, nil)
		must(t, err)
		s := waitState(t, pool, row.ID, "completed")
		if s.fence == nil || *s.fence != seen.Load() || seen.Load() == 0 {
			t.Fatalf("fence in row %v, handler saw %d", s.fence, seen.Load())
		}
	})

	t.Run("RetriesThenDiscardsKeepingEveryError", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			return fmt.Errorf("boom %d", job.Attempt)
		}, nil))
		b := startClient(t, pool, ws, nil)
		row, err := b.client.Enqueue(ctx, noteArgs{}, &pgqueue.InsertOpts{MaxAttempts: 3})
		must(t, err)
		s := waitState(t, pool, row.ID, "discarded")
		if s.attempt != 3 || !slices.Equal(s.errors, []string{"boom 1", "boom 2", "boom 3"}) {
			t.Fatalf("attempt %d errors %q", s.attempt, s.errors)
		}
	})

	t.Run("RetryWaitsForBackoff", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			return errors.New("later")
		}, nil))
		b := startClient(t, pool, ws, &pgqueue.Config{RetryPolicy: pgqueue.RetryPolicyFunc(func(attempt int, err error) time.Duration { return time.Hour })})
		row, err := b.client.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		s := waitState(t, pool, row.ID, "scheduled")
		if s.attempt != 1 || s.runAt.Sub(*s.attempts) < 59*time.Minute {
			t.Fatalf("attempt %d, run_at %s after attempt at %s", s.attempt, s.runAt, *s.attempts)
		}
	})

	t.Run("SnoozeSpendsNoAttempt", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		var runs atomic.Int32
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			if runs.Add(1) == 1 {
				return pgqueue.JobSnooze(200 * time.Millisecond)
			}
			return nil
		}, nil))
		b := startClient(t, pool, ws, nil)
		row, err := b.client.Enqueue(ctx, noteArgs{}, &pgqueue.InsertOpts{MaxAttempts: 1})
		must(t, err)
		s := waitState(t, pool, row.ID, "completed")
		if runs.Load() != 2 || s.attempt != 1 || len(s.errors) != 0 {
			t.Fatalf("runs %d attempt %d errors %q", runs.Load(), s.attempt, s.errors)
		}
	})

	t.Run("CancelEndsWithoutRetry", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		var runs atomic.Int32
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			runs.Add(1)
			return pgqueue.JobCancel(errors.New("customer gone"))
		}, nil))
		b := startClient(t, pool, ws, nil)
		row, err := b.client.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		s := waitState(t, pool, row.ID, "cancelled")
		time.Sleep(200 * time.Millisecond)
		if runs.Load() != 1 || s.attempt != 1 || !slices.Equal(s.errors, []string{"customer gone"}) {
			t.Fatalf("runs %d attempt %d errors %q", runs.Load(), s.attempt, s.errors)
		}
	})

	t.Run("PanicIsRecordedWithStack", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			panic("handler exploded")
		}, nil))
		b := startClient(t, pool, ws, nil)
		row, err := b.client.Enqueue(ctx, noteArgs{}, &pgqueue.InsertOpts{MaxAttempts: 1})
		must(t, err)
		s := waitState(t, pool, row.ID, "discarded")
		if len(s.errors) != 1 || s.errors[0] != "panic: handler exploded" || !strings.Contains(s.traces[0], "runHandler") {
			t.Fatalf("errors %q traces %q", s.errors, s.traces)
		}
	})

	t.Run("UnknownKindWaitsWithoutSpendingAttempt", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error { return nil }, nil))
		b := startClient(t, pool, ws, &pgqueue.Config{UnknownKindDelay: time.Hour})
		row, err := b.client.Enqueue(ctx, emailArgs{}, &pgqueue.InsertOpts{MaxAttempts: 1})
		must(t, err)
		s := waitState(t, pool, row.ID, "scheduled")
		if s.attempt != 0 || len(s.errors) != 1 || !strings.Contains(s.errors[0], `no worker for job kind "email"`) {
			t.Fatalf("attempt %d errors %q", s.attempt, s.errors)
		}
	})

	t.Run("MalformedArgsFailTheAttempt", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error { return nil }, nil))
		startClient(t, pool, ws, nil)
		var id int64
		must(t, pool.QueryRow(ctx, `INSERT INTO pgqueue.jobs (queue, kind, args, max_attempts) VALUES ('default', 'note', '{"n": "not a number"}', 1) RETURNING id`).Scan(&id))
		s := waitState(t, pool, id, "discarded")
		if len(s.errors) != 1 || !strings.Contains(s.errors[0], "invalid job args") {
			t.Fatalf("errors %q", s.errors)
		}
	})

	t.Run("TimeoutCancelsHandler", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			<-ctx.Done()
			return ctx.Err()
		}, &pgqueue.WorkerOpts{Timeout: 100 * time.Millisecond}))
		b := startClient(t, pool, ws, nil)
		row, err := b.client.Enqueue(ctx, noteArgs{}, &pgqueue.InsertOpts{MaxAttempts: 1})
		must(t, err)
		s := waitState(t, pool, row.ID, "discarded")
		if !slices.Equal(s.errors, []string{context.DeadlineExceeded.Error()}) {
			t.Fatalf("errors %q", s.errors)
		}
	})

	t.Run("ScheduledJobWaitsForRunAt", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error { return nil }, nil))
		b := startClient(t, pool, ws, nil)
		var runAt time.Time
		must(t, pool.QueryRow(ctx, "SELECT now() + interval '1 second'").Scan(&runAt))
		row, err := b.client.Enqueue(ctx, noteArgs{}, &pgqueue.InsertOpts{RunAt: runAt})
		must(t, err)
		if row.State != pgqueue.StateScheduled {
			t.Fatalf("state %s", row.State)
		}
		s := waitState(t, pool, row.ID, "completed")
		if s.attempts.Before(runAt) {
			t.Fatalf("started at %s, before run_at %s", s.attempts, runAt)
		}
	})

	t.Run("OrdersByPriorityThenRunAt", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		base := time.Now().Add(-time.Hour)
		type spec struct {
			n        int
			priority int16
			age      time.Duration
		}
		specs := []spec{{0, 2, 0}, {1, 0, 3 * time.Minute}, {2, 1, 0}, {3, 0, 1 * time.Minute}, {4, 2, 5 * time.Minute}, {5, 0, 2 * time.Minute}, {6, 1, time.Minute}}
		for _, s := range specs {
			_, err := c.Enqueue(ctx, noteArgs{N: s.n}, &pgqueue.InsertOpts{Priority: s.priority, RunAt: base.Add(-s.age)})
			must(t, err)
		}
		var mu sync.Mutex
		var order []int
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, job.Args.N)
			return nil
		}, nil))
		startClient(t, pool, ws, &pgqueue.Config{Queues: map[string]pgqueue.QueueConfig{pgqueue.DefaultQueue: {MaxWorkers: 1}}})
		waitFor(t, "all jobs", func() bool { return countJobs(t, pool, "state = 'completed'") == len(specs) })
		want := []int{1, 5, 3, 6, 2, 4, 0}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(order, want) {
			t.Fatalf("order %v, want %v", order, want)
		}
	})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
