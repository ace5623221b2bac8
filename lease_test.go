package pgqueue_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// auditUpdates counts every update of pgqueue.jobs by the state it wrote.
func auditUpdates(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		CREATE TABLE job_updates (job_id bigint, state text, fence bigint);
		CREATE FUNCTION audit_update() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO job_updates VALUES (NEW.id, NEW.state, NEW.fence);
			RETURN NEW;
		END $$;
		CREATE TRIGGER audit_update AFTER UPDATE ON pgqueue.jobs FOR EACH ROW EXECUTE FUNCTION audit_update();`)
	must(t, err)
}

func updatesTo(t *testing.T, pool *pgxpool.Pool, id int64, state string) int {
	t.Helper()
	var n int
	must(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM job_updates WHERE job_id = $1 AND state = $2", id, state).Scan(&n))
	return n
}

func TestLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("HeartbeatsKeepALongJob", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			select {
			case <-time.After(5 * time.Second):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}, nil))
		// Two seconds of lease, renewed every 667 ms, for a five-second job.
		b := startClient(t, pool, ws, &pgqueue.Config{JobLease: 2 * time.Second, RescueInterval: 100 * time.Millisecond})
		row, err := b.client.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		s := waitState(t, pool, row.ID, "completed")
		if s.attempt != 1 || len(s.errors) != 0 {
			t.Fatalf("attempt %d errors %q: lease not kept", s.attempt, s.errors)
		}
	})

	t.Run("LostClaimCancelsHandlerAndDropsResult", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		cause := make(chan error, 1)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return nil // a stale "success" that must not reach the row
		}, nil))
		b := startClient(t, pool, ws, &pgqueue.Config{JobLease: time.Second})
		row, err := b.client.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		waitState(t, pool, row.ID, "running")
		// Another worker takes the job over: a new fence.
		_, err = pool.Exec(ctx, "UPDATE pgqueue.jobs SET fence = nextval('pgqueue.fence_seq') WHERE id = $1", row.ID)
		must(t, err)
		select {
		case err := <-cause:
			if !errors.Is(err, pgqueue.ErrJobLeaseLost) {
				t.Fatalf("cause %v, want ErrJobLeaseLost", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("handler not cancelled after its claim was taken")
		}
		time.Sleep(200 * time.Millisecond)
		if s := readJob(t, pool, row.ID); s.state != "running" {
			t.Fatalf("stale worker's result reached the row: state %s", s.state)
		}
	})

	t.Run("UnreachableDatabaseCancelsJobsAfterLease", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		cause := make(chan error, 1)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return context.Cause(ctx)
		}, nil))
		c := newClient(t, pool, &pgqueue.Config{Workers: ws, JobLease: time.Second, Queues: map[string]pgqueue.QueueConfig{"default": {MaxWorkers: 1}}, FetchPollInterval: 50 * time.Millisecond, Logger: discardLogger()})
		_, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		must(t, c.Start(ctx))
		defer func() {
			stopCtx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_ = c.Stop(stopCtx)
		}()
		waitFor(t, "job running", func() bool { return countJobs(t, pool, "state = 'running'") == 1 })
		// Every heartbeat now fails as if the database were gone.
		pool.Close()
		select {
		case err := <-cause:
			if !errors.Is(err, pgqueue.ErrJobLeaseLost) {
				t.Fatalf("cause %v, want ErrJobLeaseLost", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("job not cancelled although no heartbeat could renew its lease")
		}
	})

	t.Run("RescueRetriesExpiredJob", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		dead := claimAsDeadWorker(t, pool, row.ID)
		ws := pgqueue.NewWorkers()
		var fence atomic.Int64
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			fence.Store(job.Fence)
			return nil
		}, nil))
		startClient(t, pool, ws, &pgqueue.Config{RescueInterval: 100 * time.Millisecond})
		s := waitState(t, pool, row.ID, "completed")
		if s.attempt != 2 || len(s.errors) != 1 || !strings.Contains(s.errors[0], "lease expired (worker dead-worker)") {
			t.Fatalf("attempt %d errors %q", s.attempt, s.errors)
		}
		if fence.Load() <= dead {
			t.Fatalf("new claim fence %d not above the dead worker's %d", fence.Load(), dead)
		}
		// The dead worker's late completion is refused.
		tag, err := pool.Exec(ctx, "UPDATE pgqueue.jobs SET state = 'completed' WHERE id = $1 AND fence = $2 AND state = 'running'", row.ID, dead)
		must(t, err)
		if tag.RowsAffected() != 0 {
			t.Fatal("stale fence accepted")
		}
	})

	t.Run("RescueDiscardsWhenAttemptsUsedUp", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, noteArgs{}, &pgqueue.InsertOpts{MaxAttempts: 1})
		must(t, err)
		claimAsDeadWorker(t, pool, row.ID)
		startClient(t, pool, pgqueue.NewWorkers(), &pgqueue.Config{RescueInterval: 100 * time.Millisecond})
		s := waitState(t, pool, row.ID, "discarded")
		if len(s.errors) != 1 || !strings.Contains(s.errors[0], "lease expired") {
			t.Fatalf("errors %q", s.errors)
		}
	})

	t.Run("RescueRacingCompletionLeavesItCompleted", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		fence := claimAsDeadWorker(t, pool, row.ID)
		rescuer := newClient(t, pool, &pgqueue.Config{RescueInterval: 50 * time.Millisecond})
		raced := make(chan struct{})
		var once atomic.Bool
		pgqueue.SetBeforeRescueWrite(rescuer, func(ids []int64) {
			if !once.CompareAndSwap(false, true) {
				return
			}
			// The slow worker completes with its old fence after the
			// rescuer read the job as expired, before it writes.
			tag, err := pool.Exec(context.Background(), "UPDATE pgqueue.jobs SET state = 'completed', finalized_at = now(), lease_until = NULL WHERE id = $1 AND fence = $2 AND state = 'running'", row.ID, fence)
			if err != nil || tag.RowsAffected() != 1 {
				t.Errorf("completion in the race window: %v, %d rows", err, tag.RowsAffected())
			}
			close(raced)
		})
		must(t, rescuer.Start(ctx))
		defer rescuer.Stop(ctx)
		<-raced
		time.Sleep(300 * time.Millisecond) // further rescue rounds
		s := readJob(t, pool, row.ID)
		if s.state != "completed" || *s.fence != fence || len(s.errors) != 0 {
			t.Fatalf("state %s fence %d errors %q: rescue overwrote a completion", s.state, *s.fence, s.errors)
		}
	})
}

// claimAsDeadWorker claims job id the way a worker would and lets its lease
// expire at once, as if that worker had died. It returns the claim's fence.
func claimAsDeadWorker(t *testing.T, pool *pgxpool.Pool, id int64) int64 {
	t.Helper()
	var fence int64
	must(t, pool.QueryRow(context.Background(), `
		UPDATE pgqueue.jobs SET state = 'running', attempt = attempt + 1, fence = nextval('pgqueue.fence_seq'),
			lease_until = now() - interval '1 second', worker_id = 'dead-worker', attempted_at = now()
		WHERE id = $1 RETURNING fence`, id).Scan(&fence))
	return fence
}

type effectArgs struct{}

func (effectArgs) Kind() string { return "effect" }

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
		t.Cleanup(func() { must(t, c.Stop(ctx)) })
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
		time.Sleep(300 * time.Millisecond)
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
		pool, c := setup(t, func(c *pgqueue.Client, pool *pgxpool.Pool) func(ctx context.Context, job *pgqueue.Job[effectArgs]) error {
			return func(ctx context.Context, job *pgqueue.Job[effectArgs]) error {
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
				got <- err
				return err
			}
		})
		row, err := c.Enqueue(ctx, effectArgs{}, nil)
		must(t, err)
		run(t, c)
		if err := <-got; !errors.Is(err, pgqueue.ErrJobLeaseLost) {
			t.Fatalf("CompleteTx: %v, want ErrJobLeaseLost", err)
		}
		var effects int
		must(t, pool.QueryRow(ctx, "SELECT count(*) FROM effects").Scan(&effects))
		if effects != 0 || readJob(t, pool, row.ID).state != "running" {
			t.Fatal("stale completion had an effect")
		}
	})
}

func TestCheckFenceTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	c := newClient(t, pool, nil)
	check := func(token int64) error {
		tx, err := pool.Begin(ctx)
		must(t, err)
		defer tx.Rollback(ctx)
		if err := c.CheckFenceTx(ctx, tx, "invoice:42", token); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	for _, step := range []struct {
		token int64
		stale bool
	}{{5, false}, {7, false}, {7, false}, {6, true}, {1, true}, {9, false}} {
		err := check(step.token)
		if step.stale != errors.Is(err, pgqueue.ErrStaleFence) || (!step.stale && err != nil) {
			t.Fatalf("token %d: err %v, stale want %v", step.token, err, step.stale)
		}
	}
	// The SQL function refuses the same way inside the caller's statements.
	_, err := pool.Exec(ctx, "SELECT pgqueue.check_fence('invoice:42', 8)")
	if !pgqueue.IsStaleFence(err) {
		t.Fatalf("SQL check_fence: %v, want PQF01", err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "PQF01" {
		t.Fatalf("SQLSTATE of %v", err)
	}
	// A token refused in a transaction never records its write.
	tx, err := pool.Begin(ctx)
	must(t, err)
	defer tx.Rollback(ctx)
	must(t, c.CheckFenceTx(ctx, tx, "other", 3))
}

func TestUnknownCommitOutcome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lostReply := errors.New("connection reset after the statement was sent")

	for _, tc := range []struct {
		name   string
		landed bool // whether the write reached the database before the error
	}{{"WriteLandedReplyLost", true}, {"WriteNeverLanded", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := newPool(t)
			auditUpdates(t, pool)
			ws := pgqueue.NewWorkers()
			must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error { return nil }, nil))
			var logs syncBuffer
			c := newClient(t, pool, &pgqueue.Config{Workers: ws, Queues: map[string]pgqueue.QueueConfig{"default": {MaxWorkers: 1}}, FetchPollInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			var failed atomic.Bool
			pgqueue.SetFinishQuery(c, func(ctx context.Context, query string, args ...any) (pgx.Rows, error) {
				if failed.CompareAndSwap(false, true) {
					if tc.landed {
						rows, err := pool.Query(ctx, query, args...)
						if err != nil {
							return nil, err
						}
						rows.Close()
						if err := rows.Err(); err != nil {
							return nil, err
						}
					}
					return nil, lostReply
				}
				return pool.Query(ctx, query, args...)
			})
			row, err := c.Enqueue(ctx, noteArgs{}, nil)
			must(t, err)
			must(t, c.Start(ctx))
			defer c.Stop(ctx)
			waitState(t, pool, row.ID, "completed")
			time.Sleep(300 * time.Millisecond)
			if n := updatesTo(t, pool, row.ID, "completed"); n != 1 {
				t.Fatalf("completed %d times, want exactly once", n)
			}
			// The client learnt the outcome instead of guessing: no false
			// report of a refused write or of giving up.
			if out := logs.String(); strings.Contains(out, "refused") || strings.Contains(out, "giving up") {
				t.Fatalf("client misread the outcome:\n%s", out)
			}
		})
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
