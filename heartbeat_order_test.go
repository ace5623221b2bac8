package pgqueue_test

import (
	"context"
	"slices"
	"testing"

	"github.com/pgqueue/pgqueue"
)

// A heartbeat and the end of a job's handler race; each order has one
// right answer, and a lost lease is reported exactly once: by the
// heartbeat when it decides first, else by the refused result.
func TestHeartbeatOrderedAgainstJobEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// claimOne enqueues and claims one job and returns a harness holding it.
	claimOne := func(t *testing.T) (*pgqueue.Client, *pgqueue.JobRow, *pgqueue.HeartbeatHarness, func(string, ...any)) {
		pool := newPool(t)
		c := newClient(t, pool, nil)
		_, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		jobs, err := pgqueue.Claim(ctx, c, pgqueue.QueueDefault, 1)
		must(t, err)
		if len(jobs) != 1 {
			t.Fatalf("claimed %d jobs, want 1", len(jobs))
		}
		exec := func(sql string, args ...any) {
			t.Helper()
			_, err := pool.Exec(ctx, sql, args...)
			must(t, err)
		}
		return c, jobs[0], pgqueue.NewHeartbeatHarness(ctx, c, jobs), exec
	}

	// The false alarm: the heartbeat read the job as running, the job
	// ended and its result landed, then the statement found no running row.
	t.Run("ResultLandsWhileHeartbeatInFlight", func(t *testing.T) {
		t.Parallel()
		c, job, x, _ := claimOne(t)
		read := x.Read()
		if x.HandlerReturned(job.ID) {
			t.Fatal("result dropped, but no heartbeat had run")
		}
		n, err := pgqueue.Complete(ctx, c, []*pgqueue.JobRow{job})
		must(t, err)
		if n != 1 {
			t.Fatalf("completion updated %d rows, want 1", n)
		}
		must(t, x.Beat(read))
		if x.Lost(job.ID) || len(x.Refused) != 0 {
			t.Fatalf("a job completed under its own fence reported as a lost lease (refused %v)", x.Refused)
		}
	})

	// The claim is gone and the heartbeat decides first: it reports the
	// loss, and the result is dropped.
	t.Run("HeartbeatFindsLossBeforeJobEnds", func(t *testing.T) {
		t.Parallel()
		_, job, x, exec := claimOne(t)
		exec("UPDATE pgqueue.jobs SET fence = nextval('pgqueue.fence_seq') WHERE id = $1", job.ID)
		must(t, x.Beat(x.Read()))
		if !x.Lost(job.ID) || !slices.Equal(x.Refused, []int64{job.ID}) {
			t.Fatalf("lost %v refused %v: the heartbeat did not report the loss", x.Lost(job.ID), x.Refused)
		}
		if !x.HandlerReturned(job.ID) {
			t.Fatal("the result of a job whose heartbeat found the claim gone is written anyway")
		}
	})

	// The claim is gone but the handler returns while the heartbeat is in
	// flight: the heartbeat says nothing, and the result's write, refused
	// by the fence, is the one report.
	t.Run("JobEndsBeforeHeartbeatDecides", func(t *testing.T) {
		t.Parallel()
		c, job, x, exec := claimOne(t)
		exec("UPDATE pgqueue.jobs SET fence = nextval('pgqueue.fence_seq') WHERE id = $1", job.ID)
		read := x.Read()
		if x.HandlerReturned(job.ID) {
			t.Fatal("result dropped, but no heartbeat had run")
		}
		must(t, x.Beat(read))
		if x.Lost(job.ID) || len(x.Refused) != 0 {
			t.Fatalf("the heartbeat reported a loss the result's write reports too (refused %v)", x.Refused)
		}
		n, err := pgqueue.Complete(ctx, c, []*pgqueue.JobRow{job})
		must(t, err)
		if n != 0 {
			t.Fatal("the fence took a stale result")
		}
	})
}
