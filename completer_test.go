package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testlog"
)

// TestUnknownCommitOutcome loses the reply of the statement that records a
// result, once after the write landed and once before: either way the job
// is completed exactly once, the client reading the row back rather than
// guessing.
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
			var logs testlog.Buffer
			c := newClient(t, pool, &pgqueue.Config{Workers: ws, Queues: map[string]pgqueue.QueueConfig{"default": {MaxWorkers: 1}}, FetchPollInterval: 50 * time.Millisecond, Logger: logs.Logger()})
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
			waitState(t, pool, row.ID, "completed")
			// Stop returns once every result is written or given up: a
			// second completion would have landed by then.
			must(t, c.Stop(ctx))
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

// TestBatchedResults checks that one batch of results refuses the jobs
// whose claim was lost and writes the others.
func TestBatchedResults(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "one batch of results refusing the lost claims and writing the others")
	ctx := context.Background()
	pool := newPool(t)
	auditUpdates(t, pool)
	var logs testlog.Buffer
	release := make(chan struct{})
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
		<-release
		if job.Args.N == 3 {
			// Taken over while running: its result must not land.
			if _, err := pool.Exec(ctx, "UPDATE pgqueue.jobs SET fence = nextval('pgqueue.fence_seq') WHERE id = $1", job.ID); err != nil {
				return err
			}
		}
		return nil
	}, nil))
	params := noteParams(8)
	_, err := newClient(t, pool, nil).EnqueueMany(ctx, params)
	must(t, err)
	startClient(t, pool, ws, &pgqueue.Config{
		Queues:             map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 8}},
		CompleteBatchDelay: 200 * time.Millisecond,
		Logger:             logs.Logger(),
	})
	waitFor(t, "all running", func() bool { return countJobs(t, pool, "state = 'running'") == 8 })
	close(release)
	waitFor(t, "seven completed", func() bool { return countJobs(t, pool, "state = 'completed'") == 7 })
	var id int64
	must(t, pool.QueryRow(ctx, "SELECT id FROM pgqueue.jobs WHERE args->>'n' = '3'").Scan(&id))
	// The batch was written and this job's result refused in it: only
	// then is the row read.
	waitFor(t, "the lost job reported", func() bool {
		return strings.Contains(logs.String(), fmt.Sprintf(`msg="pgqueue: job result refused" job=%d `, id))
	})
	if n := countJobs(t, pool, "state = 'running' AND args->>'n' = '3'"); n != 1 {
		t.Fatal("the taken-over job's stale result landed")
	}
	var statements int
	must(t, pool.QueryRow(ctx, "SELECT count(DISTINCT xmin::text) FROM pgqueue.jobs WHERE state = 'completed'").Scan(&statements))
	if statements != 1 {
		t.Fatalf("seven results written by %d transactions, want one batch", statements)
	}
	if !strings.Contains(logs.String(), fmt.Sprintf("job=%d", id)) || !strings.Contains(logs.String(), "refused") {
		t.Fatalf("lost job %d not reported:\n%s", id, logs.String())
	}
}

// TestBatchWriteRefusesOnlyLostClaims writes one batch holding written
// and refused results: a parent of two blocked children, a plain job, a
// parent whose fence went stale (its child must stay blocked), a job
// claimed again by another worker, and a deleted one. Exactly the lost
// claims are reported as refused, and the statement's count of settled
// dependents is that of the parent written: through complete_many.sql (a
// batch of completions, which returns the refused ids) and finish.sql (a
// mixed batch, which returns the updated ones).
func TestBatchWriteRefusesOnlyLostClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, mixed := range []bool{false, true} {
		name := "CompleteMany"
		if mixed {
			name = "Finish"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupWorkflow(t)
			res, err := b.client.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
				dependent(0), // 0: parent, written
				dependent(1, pgqueue.DependsOnIndex(0)),
				dependent(2, pgqueue.DependsOnIndex(0)),
				dependent(3),                            // 3: parent, stale fence
				dependent(4, pgqueue.DependsOnIndex(3)), // stays blocked
				dependent(5),                            // 5: written
				dependent(6),                            // 6: claimed again
				dependent(7),                            // 7: deleted
				dependent(8),                            // 8: written, failed when mixed
			})
			must(t, err)
			ids := res.IDs
			jobs := b.claim(t)
			if len(jobs) != 6 {
				t.Fatalf("claimed %d jobs, want the 6 without parents", len(jobs))
			}
			byID := map[int64]*pgqueue.JobRow{}
			for _, j := range jobs {
				byID[j.ID] = j
			}
			_, err = b.pool.Exec(ctx, "UPDATE pgqueue.jobs SET fence = nextval('pgqueue.fence_seq') WHERE id = $1", ids[3])
			must(t, err)
			// Taken over: back to available, as a rescue leaves it, and
			// claimed again under a new fence.
			_, err = b.pool.Exec(ctx, "UPDATE pgqueue.jobs SET state = 'available' WHERE id = $1", ids[6])
			must(t, err)
			if again := b.claim(t); len(again) != 1 || again[0].ID != ids[6] {
				t.Fatalf("claimed %d jobs again, want job %d", len(again), ids[6])
			}
			_, err = b.pool.Exec(ctx, "DELETE FROM pgqueue.jobs WHERE id = $1", ids[7])
			must(t, err)

			batch := []*pgqueue.JobRow{byID[ids[0]], byID[ids[3]], byID[ids[5]], byID[ids[6]], byID[ids[7]], byID[ids[8]]}
			ops := []string{"complete", "complete", "complete", "complete", "complete", "complete"}
			if mixed {
				ops[5] = "fail"
			}
			written, settled, err := pgqueue.WriteBatch(ctx, b.client, batch, ops)
			must(t, err)
			for _, j := range batch {
				want := j.ID == ids[0] || j.ID == ids[5] || j.ID == ids[8]
				if written[j.ID] != want {
					t.Errorf("job %d (n=%d) written %v, want %v", j.ID, slices.Index(ids, j.ID), written[j.ID], want)
				}
			}
			// The written parent released its two children, through one
			// gate (counted once); the stale one nothing.
			if settled != 1 {
				t.Errorf("settled %d dependents, want 1 (a gate)", settled)
			}
			if s := readJob(t, b.pool, ids[1]).state; s != "available" {
				t.Errorf("child of the written parent %s, want available", s)
			}
			last := "completed"
			if mixed {
				last = "available" // failed, retried
			}
			b.wantStates(t, []int64{ids[0], ids[1], ids[2], ids[3], ids[4], ids[5], ids[6], ids[8]},
				"completed", "available", "available", "running", "blocked", "completed", "running", last)

			// The same jobs again, every one now refused; nothing settles.
			written, settled, err = pgqueue.WriteBatch(ctx, b.client, batch, ops)
			must(t, err)
			if len(written) != 0 || settled != 0 {
				t.Errorf("a repeated batch: written %v, settled %d; want none", written, settled)
			}
		})
	}
}

// TestStopWritesPendingResultsAtOnce checks that Stop does not wait out
// Config.CompleteBatchDelay: results gathered for a batch are written as
// soon as Stop begins.
func TestStopWritesPendingResultsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	ran := make(chan struct{})
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
		close(ran)
		return nil
	}, nil))
	c := newClient(t, pool, &pgqueue.Config{Workers: ws, Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 1}},
		CompleteBatchDelay: time.Hour, FetchPollInterval: 50 * time.Millisecond})
	row, err := c.Enqueue(ctx, noteArgs{}, nil)
	must(t, err)
	must(t, c.Start(ctx))
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("the job never ran")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- c.Stop(ctx) }()
	select {
	case err := <-stopped:
		must(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Stop waits out the hour-long batch delay")
	}
	if s := readJob(t, pool, row.ID); s.state != "completed" {
		t.Fatalf("job %s after Stop, want completed", s.state)
	}
}

// TestQueueWideLimitWritesResultsAtOnce checks that results of a queue
// with a queue-wide limit are not gathered for CompleteBatchDelay: each
// holds a slot that every client's claims wait for. With an hour-long
// delay and MaxRunning 1, the second job runs only if the first result is
// written at once.
func TestQueueWideLimitWritesResultsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error { return nil }, nil))
	c := newClient(t, pool, &pgqueue.Config{Workers: ws, Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 2}},
		CompleteBatchDelay: time.Hour, FetchPollInterval: 50 * time.Millisecond})
	must(t, c.QueueSetLimits(ctx, pgqueue.QueueDefault, pgqueue.QueueLimits{MaxRunning: 1}))
	_, err := c.EnqueueMany(ctx, noteParams(3))
	must(t, err)
	must(t, c.Start(ctx))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	waitFor(t, "three completed", func() bool { return countJobs(t, pool, "state = 'completed'") == 3 })
}

// TestReleasingBatchesWriteAtOnce checks that while the result batches
// release dependents, results are written without gathering: with an
// hour-long CompleteBatchDelay, the steps of a workflow after its first
// batch complete only if each step's result is written at once; and once
// a batch releases nothing, results gather again. The first batch fills
// (two results, CompleteBatchSize 2), so it is written at once as well.
func TestReleasingBatchesWriteAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	returned := make(chan int64, 8)
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
		returned <- job.ID
		return nil
	}, nil))
	c := newClient(t, pool, &pgqueue.Config{Workers: ws, Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 2}},
		CompleteBatchSize: 2, CompleteBatchDelay: time.Hour, FetchPollInterval: 50 * time.Millisecond})
	// A and X first, together: a full batch. B behind A's gate (one
	// parent of the batch), C behind two edges (A and B): B's batch opens
	// a gate, C's was released by an edge.
	params := noteParams(4)
	params[2].Opts = &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnIndex(0)}}
	params[3].Opts = &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnIndex(0), pgqueue.DependsOnIndex(2)}}
	res, err := c.EnqueueMany(ctx, params)
	must(t, err)
	must(t, c.Start(ctx))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = c.Stop(context.Background())
		}
	})
	waitFor(t, "the workflow's four jobs completed", func() bool {
		return countJobs(t, pool, "workflow_id = $1 AND state = 'completed'", res.Workflow) == 4
	})

	// C's batch released nothing: a result gathers again, for the hour.
	y, err := c.Enqueue(ctx, noteArgs{N: 4}, nil)
	must(t, err)
	for id := range returned {
		if id == y.ID {
			break
		}
	}
	time.Sleep(300 * time.Millisecond)
	if s := readJob(t, pool, y.ID); s.state != "running" {
		t.Fatalf("a result after a batch that released nothing: job %s 300ms after its handler returned, want running (gathered for CompleteBatchDelay)", s.state)
	}
	stopped = true
	must(t, c.Stop(ctx))
	if s := readJob(t, pool, y.ID); s.state != "completed" {
		t.Fatalf("job %s after Stop, want completed", s.state)
	}
}
