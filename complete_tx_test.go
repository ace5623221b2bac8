package pgqueue_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testlog"
)

type effectArgs struct{}

func (effectArgs) Kind() string { return "effect" }

// TestCompleteTx checks that a handler's CompleteTx commits the job's
// completion with its own effects, all or nothing, and is refused once the
// job was taken over.
func TestCompleteTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	setup := func(t *testing.T, handler func(c *pgqueue.Client, pool *pgxpool.Pool) func(ctx context.Context, job *pgqueue.Job[effectArgs]) error) (*pgxpool.Pool, *pgqueue.Client) {
		pool := newPool(t)
		auditUpdates(t, pool)
		_, err := pool.Exec(ctx, "CREATE TABLE effects (job_id bigint, fence bigint)")
		must(t, err)
		ws := pgqueue.NewWorkers()
		c := newClient(t, pool, &pgqueue.Config{Workers: ws, Queues: map[string]pgqueue.QueueConfig{"default": {MaxWorkers: 1}},
			FetchPollInterval: 50 * time.Millisecond, RetryPolicy: pgqueue.RetryPolicyFunc(func(int, error) time.Duration { return 0 })})
		must(t, pgqueue.AddWorkerFunc(ws, handler(c, pool), nil))
		return pool, c
	}
	run := func(t *testing.T, c *pgqueue.Client) {
		must(t, c.Start(ctx))
		t.Cleanup(func() {
			if err := c.Stop(ctx); err != nil && !errors.Is(err, pgqueue.ErrNotStarted) {
				t.Error(err)
			}
		})
	}

	t.Run("EffectAndCompletionCommitTogether", func(t *testing.T) {
		t.Parallel()
		pool, c := setup(t, func(c *pgqueue.Client, pool *pgxpool.Pool) func(ctx context.Context, job *pgqueue.Job[effectArgs]) error {
			return func(ctx context.Context, job *pgqueue.Job[effectArgs]) error {
				tx, err := pool.Begin(ctx)
				if err != nil {
					return err
				}
				defer tx.Rollback(ctx)
				if _, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1, $2)", job.ID, job.Fence); err != nil {
					return err
				}
				if err := c.CompleteTx(ctx, tx, job.JobRow); err != nil {
					return err
				}
				return tx.Commit(ctx)
			}
		})
		row, err := c.Enqueue(ctx, effectArgs{}, nil)
		must(t, err)
		run(t, c)
		waitState(t, pool, row.ID, "completed")
		// Stop returns once every result is written: a second completion
		// would have landed by then.
		must(t, c.Stop(ctx))
		if n := updatesTo(t, pool, row.ID, "completed"); n != 1 {
			t.Fatalf("job completed %d times, want once", n)
		}
		var effects int
		must(t, pool.QueryRow(ctx, "SELECT count(*) FROM effects WHERE job_id = $1", row.ID).Scan(&effects))
		if effects != 1 {
			t.Fatalf("%d effects", effects)
		}
	})

	t.Run("RolledBackCompletionIsRetried", func(t *testing.T) {
		t.Parallel()
		var runs atomic.Int32
		pool, c := setup(t, func(c *pgqueue.Client, pool *pgxpool.Pool) func(ctx context.Context, job *pgqueue.Job[effectArgs]) error {
			return func(ctx context.Context, job *pgqueue.Job[effectArgs]) error {
				tx, err := pool.Begin(ctx)
				if err != nil {
					return err
				}
				defer tx.Rollback(ctx)
				if err := c.CompleteTx(ctx, tx, job.JobRow); err != nil {
					return err
				}
				if runs.Add(1) == 1 {
					return errors.New("effect failed after CompleteTx") // rolls back
				}
				return tx.Commit(ctx)
			}
		})
		row, err := c.Enqueue(ctx, effectArgs{}, nil)
		must(t, err)
		run(t, c)
		s := waitState(t, pool, row.ID, "completed")
		if s.attempt != 2 || runs.Load() != 2 {
			t.Fatalf("attempt %d runs %d", s.attempt, runs.Load())
		}
	})

	t.Run("StaleFenceIsRefused", func(t *testing.T) {
		t.Parallel()
		got := make(chan error, 1)
		checked := make(chan struct{})
		pool, c := setup(t, func(c *pgqueue.Client, pool *pgxpool.Pool) func(ctx context.Context, job *pgqueue.Job[effectArgs]) error {
			return func(jobCtx context.Context, job *pgqueue.Job[effectArgs]) error {
				// The heartbeat may see the takeover first and cancel the
				// job's context; the fence must refuse the write anyway,
				// so the writes here outlive that cancellation.
				ctx := context.WithoutCancel(jobCtx)
				// Someone took the job over while this handler ran.
				if _, err := pool.Exec(ctx, "UPDATE pgqueue.jobs SET fence = nextval('pgqueue.fence_seq') WHERE id = $1", job.ID); err != nil {
					return err
				}
				tx, err := pool.Begin(ctx)
				if err != nil {
					return err
				}
				defer tx.Rollback(ctx)
				if _, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1, $2)", job.ID, job.Fence); err != nil {
					return err
				}
				err = c.CompleteTx(ctx, tx, job.JobRow)
				if err == nil {
					err = tx.Commit(ctx)
				}
				got <- err
				// The row is read before this handler's own result (a
				// failure, refused too) is sent.
				<-checked
				return err
			}
		})
		row, err := c.Enqueue(ctx, effectArgs{}, nil)
		must(t, err)
		run(t, c)
		err = <-got
		var effects int
		must(t, pool.QueryRow(ctx, "SELECT count(*) FROM effects").Scan(&effects))
		s := readJob(t, pool, row.ID)
		close(checked) // before any Fatal: Stop waits for the handler
		if !errors.Is(err, pgqueue.ErrJobLeaseLost) {
			t.Fatalf("CompleteTx: %v, want ErrJobLeaseLost", err)
		}
		if effects != 0 || s.state != "running" {
			t.Fatalf("stale completion had an effect: %d effects, state %s", effects, s.state)
		}
	})
}

// TestCompleteTxWhileStopping checks that a handler still draining while
// Stop waits for it can complete its job in its own transaction: the
// worker knows, and does not try to complete the job a second time (which
// the fence would refuse, with a warning).
func TestCompleteTxWhileStopping(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "CompleteTx from a handler still draining during Stop")
	ctx := context.Background()
	pool := newPool(t)
	auditUpdates(t, pool)
	started, proceed := make(chan struct{}), make(chan struct{})
	var logs testlog.Buffer
	ws := pgqueue.NewWorkers()
	c := newClient(t, pool, &pgqueue.Config{Workers: ws, Queues: map[string]pgqueue.QueueConfig{"default": {MaxWorkers: 1}},
		FetchPollInterval: 50 * time.Millisecond, Logger: logs.Logger()})
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[effectArgs]) error {
		close(started)
		<-proceed // Stop has begun
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if err := c.CompleteTx(ctx, tx, job.JobRow); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}, nil))
	row, err := c.Enqueue(ctx, effectArgs{}, nil)
	must(t, err)
	must(t, c.Start(ctx))
	<-started

	stopped := make(chan error, 1)
	go func() { stopped <- c.Stop(ctx) }()
	waitFor(t, "Stop to begin", func() bool { return !pgqueue.Started(c) })
	close(proceed)
	must(t, <-stopped)

	if got := readJob(t, pool, row.ID).state; got != "completed" {
		t.Fatalf("job %s, want completed", got)
	}
	if n := updatesTo(t, pool, row.ID, "completed"); n != 1 {
		t.Fatalf("job completed %d times, want once", n)
	}
	if out := logs.String(); strings.Contains(out, "refused") {
		t.Fatalf("the worker completed the job again after its CompleteTx:\n%s", out)
	}
}
