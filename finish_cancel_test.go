package pgqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testlog"
)

// TestFinishHonoursCancelRequest writes each kind of result for a running
// job that JobCancel asked to cancel, as a client that never heard of the
// request would: every result but a completion ends the job cancelled,
// final, its attempt spent (a snooze or hand-back does not give it back).
func TestFinishHonoursCancelRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct{ op, state string }{
		{"complete", "completed"},
		{"fail", "cancelled"},
		{"snooze", "cancelled"},
		{"release", "cancelled"},
		{"discard", "cancelled"},
		{"cancel", "cancelled"},
	} {
		t.Run(tc.op, func(t *testing.T) {
			t.Parallel()
			pool := newPool(t)
			c := newClient(t, pool, &pgqueue.Config{Logger: testlog.Discard()})
			row, err := c.Enqueue(ctx, noteArgs{}, nil)
			must(t, err)
			jobs, err := pgqueue.Claim(ctx, c, pgqueue.QueueDefault, 1)
			must(t, err)
			if len(jobs) != 1 {
				t.Fatalf("claimed %d jobs", len(jobs))
			}
			got, err := c.JobCancel(ctx, row.ID)
			must(t, err)
			if got.State != pgqueue.StateRunning {
				t.Fatalf("JobCancel of a running job left it %s", got.State)
			}
			took, err := pgqueue.Finish(ctx, c, jobs[0], tc.op, time.Minute)
			must(t, err)
			if !took {
				t.Fatalf("the holder's %s result refused", tc.op)
			}
			s := readJob(t, pool, row.ID)
			if s.state != tc.state || s.attempt != 1 {
				t.Fatalf("after %s: state %s attempt %d, want %s at attempt 1", tc.op, s.state, s.attempt, tc.state)
			}
			if n := countJobs(t, pool, "id = $1 AND finalized_at IS NOT NULL", row.ID); n != 1 {
				t.Fatalf("after %s: not final", tc.op)
			}
		})
	}
}
