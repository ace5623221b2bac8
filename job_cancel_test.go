package pgqueue_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// blockingWorker registers a note worker whose handler reports that it
// started, waits for its context to end, and returns what ret makes of the
// context's cause (nil: the cause itself).
func blockingWorker(t *testing.T, started chan<- int64, cause chan<- error, ret func(cause error) error) *pgqueue.Workers {
	t.Helper()
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
		started <- job.ID
		<-ctx.Done()
		c := context.Cause(ctx)
		cause <- c
		if ret != nil {
			return ret(c)
		}
		return c
	}, &pgqueue.WorkerOpts{Timeout: -1}))
	return ws
}

// readCancel reads the columns JobCancel sets.
func readCancel(t *testing.T, pool *pgxpool.Pool, id int64) (state string, requested, finalized *time.Time) {
	t.Helper()
	must(t, pool.QueryRow(context.Background(),
		"SELECT state, cancel_requested_at, finalized_at FROM pgqueue.jobs WHERE id = $1", id).Scan(&state, &requested, &finalized))
	return state, requested, finalized
}

func TestJobCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// A completion in flight holds the row: the cancel waits for it and
	// then reports the job completed, read in the same statement (the
	// version the completion committed, not the one before it).
	t.Run("WaitsForCompletionInFlightAndReportsIt", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		fence := claimAsDeadWorker(t, pool, row.ID)
		tx, err := pool.Begin(ctx)
		must(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, `UPDATE pgqueue.jobs SET state = 'completed', finalized_at = now(), lease_until = NULL
			WHERE id = $1 AND fence = $2`, row.ID, fence)
		must(t, err)
		done := make(chan *pgqueue.JobRow, 1)
		go func() {
			job, err := c.JobCancel(ctx, row.ID)
			if err != nil {
				t.Error(err)
			}
			done <- job
		}()
		waitFor(t, "the cancel to wait on the completion's row lock", func() bool {
			return countRows(t, pool, `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
		})
		must(t, tx.Commit(ctx))
		job := <-done
		if job == nil || job.State != pgqueue.StateCompleted || !job.CancelRequestedAt.IsZero() || job.FinalizedAt.IsZero() {
			t.Fatalf("JobCancel after a completion in flight: %+v, want it completed and untouched", job)
		}
	})

	t.Run("CancelsScheduledAndAvailableAtOnce", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		available, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		scheduled, err := c.Enqueue(ctx, noteArgs{}, &pgqueue.EnqueueOpts{RunAt: time.Now().Add(time.Hour)})
		must(t, err)
		for _, id := range []int64{available.ID, scheduled.ID} {
			job, err := c.JobCancel(ctx, id)
			must(t, err)
			if job.State != pgqueue.StateCancelled || job.FinalizedAt.IsZero() || !job.CancelRequestedAt.IsZero() {
				t.Fatalf("job %d: state %s finalized %v requested %v", id, job.State, job.FinalizedAt, job.CancelRequestedAt)
			}
			if state, _, _ := readCancel(t, pool, id); state != "cancelled" {
				t.Fatalf("job %d stored as %s", id, state)
			}
		}
	})

	t.Run("FinalJobReturnedUnchanged", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		claimed, err := pgqueue.Claim(ctx, c, pgqueue.QueueDefault, 1)
		must(t, err)
		if _, err := pgqueue.Complete(ctx, c, claimed); err != nil {
			t.Fatal(err)
		}
		job, err := c.JobCancel(ctx, row.ID)
		must(t, err)
		if job.State != pgqueue.StateCompleted || job.Fence != claimed[0].Fence || !job.CancelRequestedAt.IsZero() {
			t.Fatalf("completed job changed by cancel: %+v", job)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		c := newClient(t, newPool(t), nil)
		if _, err := c.JobCancel(ctx, 12345); !errors.Is(err, pgqueue.ErrJobNotFound) {
			t.Fatalf("err = %v, want ErrJobNotFound", err)
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		t.Parallel()
		c := newClient(t, newPool(t), nil)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := c.JobCancel(cctx, 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})

	t.Run("TxRolledBackCancelsNothing", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		tx, err := pool.Begin(ctx)
		must(t, err)
		job, err := c.JobCancelTx(ctx, tx, row.ID)
		must(t, err)
		if job.State != pgqueue.StateCancelled {
			t.Fatalf("state in tx %s", job.State)
		}
		must(t, tx.Rollback(ctx))
		if state, _, _ := readCancel(t, pool, row.ID); state != "available" {
			t.Fatalf("state after rollback %s", state)
		}
		must(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := c.JobCancelTx(ctx, tx, row.ID)
			return err
		}))
		if state, _, _ := readCancel(t, pool, row.ID); state != "cancelled" {
			t.Fatalf("state after commit %s", state)
		}
	})

	// A running job's holder hears of the cancel through the control
	// channel: with a 30 s lease its first heartbeat is 10 s away, so
	// only the notification can be that quick.
	t.Run("RunningJobCancelledThroughNotification", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a running job cancelled through the notification")
		pool := newPool(t)
		started, cause := make(chan int64, 1), make(chan error, 1)
		b := startClient(t, pool, blockingWorker(t, started, cause, nil), &pgqueue.Config{JobLease: 30 * time.Second})
		row, err := b.client.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		<-started
		job, err := b.client.JobCancel(ctx, row.ID)
		must(t, err)
		committed := time.Now()
		if job.State != pgqueue.StateRunning || job.CancelRequestedAt.IsZero() || job.Fence == 0 {
			t.Fatalf("running job after cancel: state %s requested %v fence %d", job.State, job.CancelRequestedAt, job.Fence)
		}
		select {
		case c := <-cause:
			if !errors.Is(c, pgqueue.ErrJobCancelled) {
				t.Fatalf("handler's context cause %v, want ErrJobCancelled", c)
			}
			t.Logf("handler cancelled %v after the commit", time.Since(committed))
		case <-time.After(5 * time.Second):
			t.Fatal("handler not cancelled within 5 s; the heartbeat fallback would take 10 s")
		}
		s := waitState(t, pool, row.ID, "cancelled")
		if s.attempt != 1 || len(s.errors) != 1 || !strings.Contains(s.errors[0], "job cancelled") || *s.fence != job.Fence {
			t.Fatalf("attempt %d errors %q fence %d", s.attempt, s.errors, *s.fence)
		}
	})

	// A job claimed ahead, waiting for the one worker while another job
	// runs, hears the notification before it starts: its handler starts
	// cancelled, long before a heartbeat (JobLease/3, 20 s) would tell it.
	t.Run("ClaimedAheadJobStartsCancelled", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a job claimed ahead cancelled before it starts")
		pool := newPool(t)
		const blocker, target, marker = -1, -2, -3
		release := make(chan struct{})
		blocking, marked, cause := make(chan struct{}, 1), make(chan struct{}, 1), make(chan error, 1)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			switch job.Args.N {
			case blocker:
				blocking <- struct{}{}
				<-release
			case target:
				cause <- context.Cause(ctx)
				return context.Cause(ctx)
			case marker:
				marked <- struct{}{}
			}
			return nil
		}, &pgqueue.WorkerOpts{Timeout: -1}))
		// Quick jobs first: the producer learns its worker's rate and
		// claims ahead of it, the blocker and the target with them.
		params := make([]pgqueue.EnqueueManyParams, 0, 202)
		for i := range 200 {
			params = append(params, pgqueue.EnqueueManyParams{Args: noteArgs{N: i}})
		}
		params = append(params, pgqueue.EnqueueManyParams{Args: noteArgs{N: blocker}}, pgqueue.EnqueueManyParams{Args: noteArgs{N: target}})
		pre := newClient(t, pool, nil)
		_, err := pre.EnqueueMany(ctx, params)
		must(t, err)
		var targetID int64
		must(t, pool.QueryRow(ctx, `SELECT id FROM pgqueue.jobs WHERE args->>'n' = $1`, fmt.Sprint(target)).Scan(&targetID))
		// No polls: the marker queue's job is claimed on its notification.
		b := startClient(t, pool, ws, &pgqueue.Config{JobLease: time.Minute, FetchPollInterval: time.Hour,
			Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 1}, "marker": {MaxWorkers: 1}}})
		defer close(release)
		<-blocking
		waitState(t, pool, targetID, "running") // claimed, not started: the one worker is blocked
		// The client listens on the control channel (its second LISTEN)
		// before the cancel is sent: a notification sent earlier is lost.
		waitFor(t, "the client listening on the control channel", func() bool {
			var n int
			must(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND query ILIKE 'LISTEN %control%'`).Scan(&n))
			return n == 1
		})
		job, err := b.client.JobCancel(ctx, targetID)
		must(t, err)
		if job.State != pgqueue.StateRunning {
			t.Fatalf("target %s after the cancel, want running", job.State)
		}
		// The client handles its notifications in order on one connection:
		// once the marker job, enqueued by another client after the cancel
		// committed, runs, the cancel's notification has been handled,
		// before the target starts.
		_, err = pre.Enqueue(ctx, noteArgs{N: marker}, &pgqueue.EnqueueOpts{Queue: "marker"}) // another client: the started one would wake its producer itself
		must(t, err)
		select {
		case <-marked:
		case <-time.After(10 * time.Second):
			t.Fatal("the marker job did not run")
		}
		release <- struct{}{}
		select {
		case c := <-cause:
			if !errors.Is(c, pgqueue.ErrJobCancelled) {
				t.Fatalf("the target started with cause %v, want ErrJobCancelled", c)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the target did not start")
		}
		waitState(t, pool, targetID, "cancelled")
	})

	// Without notifications the heartbeat brings the request.
	t.Run("PollOnlyClientHearsAtHeartbeat", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a poll-only client hearing a cancel request at its heartbeat")
		pool := newPool(t)
		started, cause := make(chan int64, 1), make(chan error, 1)
		b := startClient(t, pool, blockingWorker(t, started, cause, nil),
			&pgqueue.Config{PollOnly: true, JobLease: 3 * time.Second, HeartbeatInterval: 500 * time.Millisecond})
		row, err := b.client.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		<-started // by polling: no notification reached the client
		_, err = b.client.JobCancel(ctx, row.ID)
		must(t, err)
		select {
		case c := <-cause:
			if !errors.Is(c, pgqueue.ErrJobCancelled) {
				t.Fatalf("cause %v", c)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("handler not cancelled within 20 heartbeats")
		}
		waitState(t, pool, row.ID, "cancelled")
	})

	// The handler finished its work after all: the job is completed.
	t.Run("HandlerReturningNilCompletes", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		started, cause := make(chan int64, 1), make(chan error, 1)
		b := startClient(t, pool, blockingWorker(t, started, cause, func(error) error { return nil }), nil)
		row, err := b.client.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		<-started
		_, err = b.client.JobCancel(ctx, row.ID)
		must(t, err)
		<-cause
		waitState(t, pool, row.ID, "completed")
	})

	// The request never reached the client (poll only, no heartbeat due),
	// and the handler fails on its own: the failure lands as cancelled,
	// not as a retry, because finish.sql reads the request in the row.
	t.Run("FailureAfterUnheardRequestEndsCancelled", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		started, release := make(chan int64, 1), make(chan struct{})
		var heardCancel atomic.Bool
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			started <- job.ID
			<-release
			heardCancel.Store(ctx.Err() != nil)
			return errors.New("boom")
		}, nil))
		b := startClient(t, pool, ws, &pgqueue.Config{PollOnly: true, JobLease: 30 * time.Second})
		row, err := b.client.Enqueue(ctx, noteArgs{}, &pgqueue.EnqueueOpts{MaxAttempts: 5})
		must(t, err)
		<-started
		_, err = b.client.JobCancel(ctx, row.ID)
		must(t, err)
		close(release)
		s := waitState(t, pool, row.ID, "cancelled")
		if heardCancel.Load() {
			t.Fatal("the client heard of the request: this test wants it unheard")
		}
		if s.attempt != 1 || len(s.errors) != 1 || s.errors[0] != "boom" {
			t.Fatalf("attempt %d errors %q", s.attempt, s.errors)
		}
	})

	// Completion and cancel race for the row: whichever commits first
	// wins, and the other does not undo it.
	t.Run("CompletionLandingFirstStaysCompleted", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		claimed, err := pgqueue.Claim(ctx, c, pgqueue.QueueDefault, 1)
		must(t, err)
		// The completion holds the row when the cancel arrives.
		tx, err := pool.Begin(ctx)
		must(t, err)
		must(t, c.CompleteTx(ctx, tx, claimed[0]))
		done := make(chan *pgqueue.JobRow)
		go func() {
			job, err := c.JobCancel(ctx, row.ID)
			if err != nil {
				t.Error(err)
			}
			done <- job
		}()
		waitFor(t, "the cancel to wait for the completion's row lock", func() bool {
			return countBlocked(t, pool) == 1
		})
		must(t, tx.Commit(ctx))
		job := <-done
		if job.State != pgqueue.StateCompleted || !job.CancelRequestedAt.IsZero() {
			t.Fatalf("cancel after completion: state %s requested %v", job.State, job.CancelRequestedAt)
		}
	})

	t.Run("CancelLandingFirstThenCompletion", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		claimed, err := pgqueue.Claim(ctx, c, pgqueue.QueueDefault, 1)
		must(t, err)
		_, err = c.JobCancel(ctx, row.ID)
		must(t, err)
		if n, err := pgqueue.Complete(ctx, c, claimed); err != nil || n != 1 {
			t.Fatalf("completion under the same fence: %d, %v", n, err)
		}
		if state, requested, _ := readCancel(t, pool, row.ID); state != "completed" || requested == nil {
			t.Fatalf("state %s requested %v", state, requested)
		}
	})
}

// countBlocked counts the backends of the test's database waiting for a
// lock.
func countBlocked(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	must(t, pool.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n))
	return n
}

// TestJobCancelRescue: a cancel-requested job whose holder is gone is
// finalized cancelled by the rescuer, whichever of the two reaches the row
// first, and its old holder's writes are refused.
func TestJobCancelRescue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("RescueFirstThenCancel", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		dead := claimAsDeadWorker(t, pool, row.ID)
		rescuer := startClient(t, pool, pgqueue.NewWorkers(), &pgqueue.Config{RescueInterval: 50 * time.Millisecond,
			Queues: map[string]pgqueue.QueueConfig{"elsewhere": {MaxWorkers: 1}}})
		// Rescued: scheduled for its retry, or already available when the
		// leader's scheduler ran after a short backoff (nobody works its
		// queue, so it stays there).
		var s jobState
		waitFor(t, "the rescue", func() bool {
			s = readJob(t, pool, row.ID)
			return (s.state == "scheduled" || s.state == "available") && s.fence != nil && *s.fence != dead
		})
		job, err := rescuer.client.JobCancel(ctx, row.ID)
		must(t, err)
		if job.State != pgqueue.StateCancelled || job.Fence != *s.fence {
			t.Fatalf("state %s fence %d, want cancelled under the rescue's fence %d", job.State, job.Fence, *s.fence)
		}
	})

	t.Run("CancelFirstThenRescue", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		dead := claimAsDeadWorker(t, pool, row.ID)
		job, err := c.JobCancel(ctx, row.ID)
		must(t, err)
		if job.State != pgqueue.StateRunning {
			t.Fatalf("state %s", job.State)
		}
		startClient(t, pool, pgqueue.NewWorkers(), &pgqueue.Config{RescueInterval: 50 * time.Millisecond})
		s := waitState(t, pool, row.ID, "cancelled")
		if len(s.errors) != 1 || !strings.Contains(s.errors[0], "cancelled as requested") || *s.fence == dead {
			t.Fatalf("errors %q fence %d (dead holder's %d)", s.errors, *s.fence, dead)
		}
		assertStaleWriteRefused(t, pool, row.ID, dead)
	})

	// The cancel commits after the rescuer read the job as expired and
	// before it writes: the write sees the request and cancels.
	t.Run("CancelInRescueWindow", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a cancel request meeting the rescue of an expired job")
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		dead := claimAsDeadWorker(t, pool, row.ID)
		rescuer := newClient(t, pool, &pgqueue.Config{RescueInterval: 50 * time.Millisecond})
		var once atomic.Bool
		pgqueue.SetBeforeRescueWrite(rescuer, func([]int64) {
			if once.CompareAndSwap(false, true) {
				if _, err := c.JobCancel(context.Background(), row.ID); err != nil {
					t.Error(err)
				}
			}
		})
		must(t, rescuer.Start(ctx))
		defer rescuer.Stop(ctx)
		s := waitState(t, pool, row.ID, "cancelled")
		if !once.Load() || len(s.errors) != 1 {
			t.Fatalf("hook ran %v, errors %q", once.Load(), s.errors)
		}
		assertStaleWriteRefused(t, pool, row.ID, dead)
	})
}

// assertStaleWriteRefused checks that a write under the old fence changes
// nothing.
func assertStaleWriteRefused(t *testing.T, pool *pgxpool.Pool, id, fence int64) {
	t.Helper()
	tag, err := pool.Exec(context.Background(),
		"UPDATE pgqueue.jobs SET state = 'completed' WHERE id = $1 AND fence = $2 AND state = 'running'", id, fence)
	must(t, err)
	if tag.RowsAffected() != 0 {
		t.Fatal("stale fence accepted")
	}
}

// TestJobCancelStoppedHolder cancels a job whose holder, another process,
// is SIGSTOPped: the rescuer ends it cancelled once its lease expires, and
// when the holder resumes, hears the request and writes its result, the
// write is refused.
func TestJobCancelStoppedHolder(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "the cancel of a job whose holder process is SIGSTOPped")
	ctx := context.Background()
	pool := newPool(t)
	c := newClient(t, pool, &pgqueue.Config{RescueInterval: 100 * time.Millisecond})
	row, err := c.Enqueue(ctx, noteArgs{}, nil)
	must(t, err)
	auditUpdates(t, pool)

	cmd, handling := startCancelHolder(t, pool)
	// Not the row's running state: a claimed job may wait in the holder
	// for a worker and, held up past its lease, be handed back.
	handling()
	s := readJob(t, pool, row.ID)
	holderFence := *s.fence
	must(t, cmd.Process.Signal(syscall.SIGSTOP))
	// A statement the holder sent before it stopped still runs: wait for
	// it, then check the holder still holds the job. Were its result in
	// flight (its lease run out by its own clock, see
	// TestJobCancelResultInFlight), it would land after JobCancel and end
	// the job cancelled under the old fence.
	waitFor(t, "the stopped holder's statements to end", func() bool {
		var n int
		must(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()`).Scan(&n))
		return n == 0
	})
	if s := readJob(t, pool, row.ID); s.state != "running" || *s.fence != holderFence {
		t.Fatalf("the holder wrote before it stopped (its lease lost by its own clock?): state %s fence %d", s.state, *s.fence)
	}

	job, err := c.JobCancel(ctx, row.ID)
	must(t, err)
	if job.State != pgqueue.StateRunning || job.CancelRequestedAt.IsZero() {
		t.Fatalf("state %s requested %v", job.State, job.CancelRequestedAt)
	}
	must(t, c.Start(ctx)) // the rescuer
	defer c.Stop(ctx)
	s = waitState(t, pool, row.ID, "cancelled")
	if *s.fence == holderFence {
		t.Fatal("rescued without a new fence")
	}

	// The holder wakes, hears the request, and its handler returns: its
	// result is written under the old fence and refused.
	must(t, cmd.Process.Signal(syscall.SIGCONT))
	var status syscall.WaitStatus
	waitFor(t, "the holder to write and exit", func() bool { return reaped(cmd, &status) })
	if status.ExitStatus() != 0 {
		t.Fatalf("holder exited with %d", status.ExitStatus())
	}
	after := readJob(t, pool, row.ID)
	if after.state != "cancelled" || *after.fence != *s.fence || len(after.errors) != 1 {
		t.Fatalf("after the holder resumed: state %s fence %d errors %q", after.state, *after.fence, after.errors)
	}
	if n := updatesTo(t, pool, row.ID, "cancelled"); n != 1 {
		t.Fatalf("%d updates wrote cancelled, want the rescuer's alone", n)
	}
}

// reaped reports whether cmd's process has exited, reaping it and storing
// its status.
func reaped(cmd *exec.Cmd, status *syscall.WaitStatus) bool {
	pid, err := syscall.Wait4(cmd.Process.Pid, status, syscall.WNOHANG, nil)
	return err == nil && pid == cmd.Process.Pid
}

// cancelHolderChild is the holder process of TestJobCancelStoppedHolder:
// it works the job with a 2 s lease, its handler waiting for its context,
// and exits once the job's result was written (or refused).
func cancelHolderChild(ctx context.Context, pool *pgxpool.Pool) error {
	ws := pgqueue.NewWorkers()
	finished := make(chan error, 1)
	if err := pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
		fmt.Println(holderHandlingLine)
		<-ctx.Done()
		finished <- context.Cause(ctx)
		return context.Cause(ctx)
	}, &pgqueue.WorkerOpts{Timeout: -1}); err != nil {
		return err
	}
	// Open the pool's connections now: on a server out of connections
	// the heartbeat would fail to open one and the lease run out.
	conns := make([]*pgxpool.Conn, 0, pool.Config().MaxConns)
	for range pool.Config().MaxConns {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		conns = append(conns, conn)
	}
	for _, conn := range conns {
		conn.Release()
	}
	c, err := pgqueue.New(pool, &pgqueue.Config{Workers: ws, JobLease: 2 * time.Second,
		Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 1}}})
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	cause := <-finished
	if err := c.Stop(ctx); err != nil {
		return err
	}
	if !errors.Is(cause, pgqueue.ErrJobCancelled) && !errors.Is(cause, pgqueue.ErrJobLeaseLost) {
		return fmt.Errorf("handler cancelled with %v", cause)
	}
	return nil
}

// TestJobCancelResultInFlight forces the interleaving behind a holder that
// seemed to write its cancellation while SIGSTOPped: its lease ran out by
// its own clock (its heartbeats blocked, here on a row lock; in a full run
// on a shared server, on "too many clients"), its handler returned
// ErrJobLeaseLost, and its result was on its way to the server when it
// stopped. JobCancel commits first; the result then lands under the
// holder's fence, which no rescue has replaced, and ends the job
// cancelled as requested: the product is right, and a stopped holder can
// still have a statement in flight.
func TestJobCancelResultInFlight(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "a stopped holder's result in flight meeting JobCancel")
	ctx := context.Background()
	pool := newPool(t)
	c := newClient(t, pool, nil)
	row, err := c.Enqueue(ctx, noteArgs{}, nil)
	must(t, err)

	cmd, handling := startCancelHolder(t, pool)
	handling()
	holderFence := *readJob(t, pool, row.ID).fence

	// Block the holder's heartbeats and, once its lease ran out, its
	// result, on the job's row.
	tx, err := pool.Begin(ctx)
	must(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SELECT 1 FROM pgqueue.jobs WHERE id = $1 FOR UPDATE", row.ID)
	must(t, err)
	waitFor(t, "the holder's result to wait on the row", func() bool {
		var n int
		must(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '-- finish:%'`).Scan(&n))
		return n == 1
	})
	must(t, cmd.Process.Signal(syscall.SIGSTOP))
	// JobCancel's write to a running job, committed before the result.
	_, err = tx.Exec(ctx, "UPDATE pgqueue.jobs SET cancel_requested_at = now() WHERE id = $1", row.ID)
	must(t, err)
	must(t, tx.Commit(ctx))

	s := waitState(t, pool, row.ID, "cancelled")
	if *s.fence != holderFence {
		t.Fatalf("fence %d, want the stopped holder's %d: its result in flight ended the job", *s.fence, holderFence)
	}
}

// holderHandlingLine is what the holder child prints once its handler runs.
const holderHandlingLine = "cancelholder: handling"

// startCancelHolder starts a child process that claims the job and runs
// its handler until cancelled (childEnv "cancelholder"), killed when the
// test ends; handling waits until the handler runs.
func startCancelHolder(t *testing.T, pool *pgxpool.Pool) (cmd *exec.Cmd, handling func()) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=cancelholder", childDBEnv+"="+childConnString(t, pool, 1))
	cmd.Stderr = os.Stderr
	handling = holderHandling(t, cmd)
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, handling
}

// holderHandling returns a function that waits until the holder child cmd,
// not started yet, says its handler runs.
func holderHandling(t *testing.T, cmd *exec.Cmd) func() {
	t.Helper()
	out, err := cmd.StdoutPipe()
	must(t, err)
	said := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == holderHandlingLine {
				close(said)
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	return func() {
		t.Helper()
		select {
		case <-said:
		case <-time.After(30 * time.Second):
			t.Fatal("timed out waiting for the holder's handler to run")
		}
	}
}
