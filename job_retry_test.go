package pgqueue_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// controlBundle is a client that is not started, on a database of its own.
type controlBundle struct {
	pool   *pgxpool.Pool
	client *pgqueue.Client
}

func setupControl(t *testing.T) *controlBundle {
	t.Helper()
	pool := newPool(t)
	return &controlBundle{pool: pool, client: newClient(t, pool, nil)}
}

// jobIn enqueues a note job (MaxAttempts 3) and puts it in state as the
// library would have left it: scheduled in an hour, completed or cancelled
// after one attempt, discarded after its three, with an error each.
func (b *controlBundle) jobIn(t *testing.T, state pgqueue.JobState, opts *pgqueue.EnqueueOpts) int64 {
	t.Helper()
	if opts == nil {
		opts = &pgqueue.EnqueueOpts{}
	}
	opts.MaxAttempts = 3
	res, err := b.client.Enqueue(context.Background(), noteArgs{}, opts)
	must(t, err)
	var set string
	switch state {
	case pgqueue.StateAvailable:
		return res.ID
	case pgqueue.StateScheduled:
		set = `state = 'scheduled', run_at = now() + interval '1 hour'`
	case pgqueue.StateCompleted:
		set = `state = 'completed', attempt = 1, fence = nextval('pgqueue.fence_seq'), attempted_at = now(), finalized_at = now()`
	case pgqueue.StateCancelled:
		set = `state = 'cancelled', attempt = 1, fence = nextval('pgqueue.fence_seq'), attempted_at = now(), finalized_at = now(),
			cancel_requested_at = now(), errors = '[{"attempt": 1, "at": "2026-01-01T00:00:00Z", "error": "cancelled"}]'`
	case pgqueue.StateDiscarded:
		set = `state = 'discarded', attempt = 3, fence = nextval('pgqueue.fence_seq'), attempted_at = now(), finalized_at = now(),
			errors = (SELECT jsonb_agg(jsonb_build_object('attempt', a, 'at', now(), 'error', 'boom ' || a)) FROM generate_series(1, 3) a)`
	default:
		t.Fatalf("jobIn: state %s", state)
	}
	_, err = b.pool.Exec(context.Background(), "UPDATE pgqueue.jobs SET "+set+" WHERE id = $1", res.ID)
	must(t, err)
	return res.ID
}

// mustBegin begins a transaction, rolled back when the test ends unless
// it ended before.
func (b *controlBundle) mustBegin(t *testing.T) pgx.Tx {
	t.Helper()
	tx, err := b.pool.Begin(context.Background())
	must(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// raceWithClaim runs one and many (a control call on job id, alone and in
// a batch) while tx holds the claim of id, waits until both wait on the
// claimed row, commits tx, and checks that both found the job running and
// left the claim as it was.
func (b *controlBundle) raceWithClaim(t *testing.T, tx pgx.Tx, claimed *pgqueue.JobRow, id int64,
	one func() error, many func() (*pgqueue.JobManyResult, error)) {
	t.Helper()
	ctx := context.Background()
	oneErr := make(chan error, 1)
	manyRes := make(chan *pgqueue.JobManyResult, 1)
	go func() { oneErr <- one() }()
	go func() {
		res, err := many()
		if err != nil {
			t.Error(err)
		}
		manyRes <- res
	}()
	waitFor(t, "both calls to wait on the claim's row lock", func() bool {
		return countRows(t, b.pool, `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 2
	})
	must(t, tx.Commit(ctx))
	if err := <-oneErr; !errors.Is(err, pgqueue.ErrJobRunning) {
		t.Errorf("alone: err = %v, want ErrJobRunning", err)
	}
	if res := <-manyRes; res == nil || !slices.Equal(res.Running, []int64{id}) || len(res.Changed) != 0 {
		t.Errorf("in a batch: %+v, want the job reported running", res)
	}
	after := readClaim(t, b.pool, id)
	if after.state != "running" || *after.fence != claimed.Fence || !after.leaseUntil.Equal(claimed.LeaseUntil) {
		t.Fatalf("claim changed: %+v, claimed with fence %d lease %v", after, claimed.Fence, claimed.LeaseUntil)
	}
}

// claimOf is what a running job's holder depends on.
type claimOf struct {
	state      string
	fence      *int64
	leaseUntil *time.Time
	workerID   *string
}

func readClaim(t *testing.T, pool *pgxpool.Pool, id int64) claimOf {
	t.Helper()
	var c claimOf
	must(t, pool.QueryRow(context.Background(), "SELECT state, fence, lease_until, worker_id FROM pgqueue.jobs WHERE id = $1", id).
		Scan(&c.state, &c.fence, &c.leaseUntil, &c.workerID))
	return c
}

// waitLockWaiter waits until a session of the test's database waits on a
// lock: the statement raced against an open transaction has reached the
// row that transaction holds.
func waitLockWaiter(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	waitFor(t, "a statement waiting on a row lock", func() bool {
		return countRows(t, pool, `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0
	})
}

func countRows(t *testing.T, pool *pgxpool.Pool, query string) int {
	t.Helper()
	var n int
	must(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM ("+query+") r").Scan(&n))
	return n
}

func TestJobRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("DiscardedGetsExactlyOneMoreAttempt", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		id := b.jobIn(t, pgqueue.StateDiscarded, nil)
		job, err := b.client.JobRetry(ctx, id)
		must(t, err)
		if job.State != pgqueue.StateAvailable || job.Attempt != 3 || job.MaxAttempts != 4 || !job.FinalizedAt.IsZero() {
			t.Fatalf("retried: state %s attempt %d/%d finalized %v, want available 3/4 not finalized",
				job.State, job.Attempt, job.MaxAttempts, job.FinalizedAt)
		}
		if len(job.Errors) != 3 || job.Errors[2].Error != "boom 3" {
			t.Errorf("errors = %+v, want the three kept", job.Errors)
		}
		if n := countJobs(t, b.pool, "id = $1 AND run_at <= now() AND run_at > now() - interval '1 minute'", id); n != 1 {
			t.Error("run_at is not now")
		}
		claimed, err := pgqueue.Claim(ctx, b.client, pgqueue.QueueDefault, 10)
		must(t, err)
		if len(claimed) != 1 || claimed[0].ID != id || claimed[0].Attempt != 4 {
			t.Fatalf("claimed %+v, want job %d at attempt 4", claimed, id)
		}
	})

	t.Run("CompletedAndCancelledKeepTheirAttemptsLeft", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		for _, state := range []pgqueue.JobState{pgqueue.StateCompleted, pgqueue.StateCancelled} {
			id := b.jobIn(t, state, nil)
			job, err := b.client.JobRetry(ctx, id)
			must(t, err)
			if job.State != pgqueue.StateAvailable || job.Attempt != 1 || job.MaxAttempts != 3 {
				t.Errorf("%s retried: state %s attempt %d/%d, want available 1/3", state, job.State, job.Attempt, job.MaxAttempts)
			}
			if n := countJobs(t, b.pool, "id = $1 AND cancel_requested_at IS NULL AND finalized_at IS NULL", id); n != 1 {
				t.Errorf("%s retried: cancel_requested_at or finalized_at left set", state)
			}
		}
	})

	t.Run("ScheduledIsMadeAvailableNow", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		id := b.jobIn(t, pgqueue.StateScheduled, nil)
		job, err := b.client.JobRetry(ctx, id)
		must(t, err)
		if job.State != pgqueue.StateAvailable || job.RunAt.After(time.Now().Add(time.Minute)) {
			t.Fatalf("retried: state %s run_at %v, want available now", job.State, job.RunAt)
		}
	})

	t.Run("AvailableIsLeftAsIs", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		id := b.jobIn(t, pgqueue.StateAvailable, nil)
		before := readJob(t, b.pool, id)
		job, err := b.client.JobRetry(ctx, id)
		must(t, err)
		if job.State != pgqueue.StateAvailable || !job.RunAt.Equal(before.runAt) {
			t.Fatalf("job %s run_at %v, want available, run_at %v unchanged", job.State, job.RunAt, before.runAt)
		}
	})

	t.Run("ErrorIfRunning", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		id := b.jobIn(t, pgqueue.StateAvailable, nil)
		_, err := pgqueue.Claim(ctx, b.client, pgqueue.QueueDefault, 1)
		must(t, err)
		before := readClaim(t, b.pool, id)
		if _, err := b.client.JobRetry(ctx, id); !errors.Is(err, pgqueue.ErrJobRunning) {
			t.Fatalf("err = %v, want ErrJobRunning", err)
		}
		if after := readClaim(t, b.pool, id); after.state != "running" || *after.fence != *before.fence || !after.leaseUntil.Equal(*before.leaseUntil) {
			t.Fatalf("claim changed: %+v, was %+v", after, before)
		}
	})

	t.Run("ErrorIfNotFound", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		if _, err := b.client.JobRetry(ctx, 4711); !errors.Is(err, pgqueue.ErrJobNotFound) {
			t.Fatalf("err = %v, want ErrJobNotFound", err)
		}
	})

	t.Run("WakesTheQueueAtCommit", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		id := b.jobIn(t, pgqueue.StateDiscarded, &pgqueue.EnqueueOpts{Queue: "mail"})
		conn, err := b.pool.Acquire(ctx)
		must(t, err)
		defer conn.Release()
		_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{pgqueue.NotifyChannel("pgqueue")}.Sanitize())
		must(t, err)

		tx, err := b.pool.Begin(ctx)
		must(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = b.client.JobRetryTx(ctx, tx, id)
		must(t, err)
		must(t, tx.Commit(ctx))
		wait, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := conn.Conn().WaitForNotification(wait)
		must(t, err)
		if n.Payload != "mail" {
			t.Fatalf("notification for %q, want mail", n.Payload)
		}
	})

	t.Run("UniqueConflictChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		// Discarded is outside the default unique states: an equal job
		// was enqueued after this one failed, and holds the key now.
		unique := func() *pgqueue.EnqueueOpts { return &pgqueue.EnqueueOpts{Unique: &pgqueue.UniqueOpts{ByArgs: true}} }
		old := b.jobIn(t, pgqueue.StateDiscarded, unique())
		newer, err := b.client.Enqueue(ctx, noteArgs{}, unique())
		must(t, err)
		if newer.Duplicate {
			t.Fatal("the discarded job still blocks its key")
		}
		other := b.jobIn(t, pgqueue.StateCompleted, nil)

		if _, err := b.client.JobRetry(ctx, old); !errors.Is(err, pgqueue.ErrUniqueConflict) {
			t.Fatalf("JobRetry: err = %v, want ErrUniqueConflict", err)
		}
		if _, err := b.client.JobRetryMany(ctx, []int64{other, old}); !errors.Is(err, pgqueue.ErrUniqueConflict) {
			t.Fatalf("JobRetryMany: err = %v, want ErrUniqueConflict", err)
		}
		tx, err := b.pool.Begin(ctx)
		must(t, err)
		if _, err := b.client.JobRetryTx(ctx, tx, old); !errors.Is(err, pgqueue.ErrUniqueConflict) {
			t.Fatalf("JobRetryTx: err = %v, want ErrUniqueConflict", err)
		}
		// The savepoint kept tx usable.
		_, err = b.client.JobRetryTx(ctx, tx, other)
		must(t, err)
		must(t, tx.Rollback(ctx))

		if s := readJob(t, b.pool, old); s.state != "discarded" || s.attempt != 3 {
			t.Errorf("old job: %+v, want discarded as it was", s)
		}
		if s := readJob(t, b.pool, other); s.state != "completed" {
			t.Errorf("other job of the batch: %s, want completed as it was", s.state)
		}
	})

	// A discarded job is retried and claimed in a transaction still open
	// while JobRetry runs: JobRetry's snapshot saw it discarded, but it
	// must not write a job that is running by the time it gets the row.
	t.Run("RaceWithClaimLeavesTheClaimAlone", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		id := b.jobIn(t, pgqueue.StateDiscarded, nil)
		tx, err := b.pool.Begin(ctx)
		must(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = b.client.JobRetryTx(ctx, tx, id)
		must(t, err)
		claimed, err := pgqueue.ClaimTx(ctx, b.client, tx, pgqueue.QueueDefault, 1)
		must(t, err)
		if len(claimed) != 1 {
			t.Fatalf("claimed %d jobs", len(claimed))
		}

		b.raceWithClaim(t, tx, claimed[0], id,
			func() error { _, err := b.client.JobRetry(ctx, id); return err },
			func() (*pgqueue.JobManyResult, error) { return b.client.JobRetryMany(ctx, []int64{id}) })
	})

	t.Run("ManySaysWhatHappenedToEachID", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		discarded := b.jobIn(t, pgqueue.StateDiscarded, nil)
		completed := b.jobIn(t, pgqueue.StateCompleted, &pgqueue.EnqueueOpts{Queue: "other"})
		running := b.jobIn(t, pgqueue.StateAvailable, nil)
		_, err := pgqueue.Claim(ctx, b.client, pgqueue.QueueDefault, 1)
		must(t, err)
		available := b.jobIn(t, pgqueue.StateAvailable, nil)
		before := readClaim(t, b.pool, running)

		res, err := b.client.JobRetryMany(ctx, []int64{4711, completed, running, discarded, available, discarded})
		must(t, err)
		want := &pgqueue.JobManyResult{
			Changed:   []int64{discarded, completed},
			Unchanged: []int64{available},
			Running:   []int64{running},
			NotFound:  []int64{4711},
		}
		if !slices.Equal(res.Changed, want.Changed) || !slices.Equal(res.Unchanged, want.Unchanged) ||
			!slices.Equal(res.Running, want.Running) || !slices.Equal(res.NotFound, want.NotFound) {
			t.Fatalf("result %+v, want %+v", res, want)
		}
		if n := countJobs(t, b.pool, "id = ANY($1) AND state = 'available'", []int64{discarded, completed}); n != 2 {
			t.Errorf("%d of 2 jobs available", n)
		}
		if after := readClaim(t, b.pool, running); *after.fence != *before.fence || !after.leaseUntil.Equal(*before.leaseUntil) {
			t.Errorf("running job's claim changed: %+v, was %+v", after, before)
		}
	})
}
