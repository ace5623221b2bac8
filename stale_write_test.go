package pgqueue_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testlog"
)

// TestStaleWriteRefusedByFence makes every write a worker sends about a
// job it claimed, after another worker took the job over: the job is
// still running, under the new holder's fence, so only the fence
// condition of each statement can refuse the write. Each subtest names the
// write whose fence it checks; the row must be left exactly as it was, and
// the holder's own write of the same kind must land (the test is not
// vacuous).
func TestStaleWriteRefusedByFence(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "every kind of stale write refused by the fence")
	ctx := context.Background()

	// setup claims a job (the stale claim), then lets another claim take it
	// over, and returns both claims.
	setup := func(t *testing.T) (c *pgqueue.Client, pool *pgxpool.Pool, read func() string, stale, holder *pgqueue.JobRow) {
		pool = newPool(t)
		c = newClient(t, pool, &pgqueue.Config{Logger: testlog.Discard()})
		row, err := c.Enqueue(ctx, noteArgs{}, &pgqueue.EnqueueOpts{MaxAttempts: 1})
		must(t, err)
		claim := func() *pgqueue.JobRow {
			jobs, err := pgqueue.Claim(ctx, c, pgqueue.QueueDefault, 1)
			must(t, err)
			if len(jobs) != 1 || jobs[0].ID != row.ID {
				t.Fatalf("claimed %d jobs, want job %d", len(jobs), row.ID)
			}
			return jobs[0]
		}
		stale = claim()
		// Taken over: back to available (as a rescue would leave it) and
		// claimed again, with a new fence.
		_, err = pool.Exec(ctx, "UPDATE pgqueue.jobs SET state = 'available' WHERE id = $1", row.ID)
		must(t, err)
		holder = claim()
		if holder.Fence <= stale.Fence {
			t.Fatalf("takeover fence %d not above %d", holder.Fence, stale.Fence)
		}
		read = func() string {
			var s string
			must(t, pool.QueryRow(ctx, "SELECT to_jsonb(j)::text FROM pgqueue.jobs j WHERE id = $1", row.ID).Scan(&s))
			return s
		}
		return c, pool, read, stale, holder
	}
	// unchanged fails the test when the row differs from before.
	unchanged := func(t *testing.T, what, before, after string) {
		t.Helper()
		if before != after {
			t.Fatalf("the stale %s changed the row of a job another worker holds:\nbefore %s\nafter  %s", what, before, after)
		}
	}

	for _, op := range []string{"complete", "fail", "snooze", "cancel", "release", "discard"} {
		name := map[string]string{"complete": "CompleteOne"}[op]
		if name == "" {
			name = "Finish" + string(op[0]-'a'+'A') + op[1:]
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, _, read, stale, holder := setup(t)
			before := read()
			took, err := pgqueue.Finish(ctx, c, stale, op, time.Minute)
			must(t, err)
			if took {
				t.Fatalf("stale %s result reported as written", op)
			}
			unchanged(t, op+" result", before, read())
			took, err = pgqueue.Finish(ctx, c, holder, op, time.Minute)
			must(t, err)
			if !took || read() == before {
				t.Fatalf("the holder's own %s result did not land", op)
			}
		})
	}

	// A batch of two completions (complete_many.sql, where a batch of one
	// goes through complete_one.sql): the stale one is refused, the other
	// lands.
	t.Run("CompleteMany", func(t *testing.T) {
		t.Parallel()
		c, _, read, stale, holder := setup(t)
		_, err := c.Enqueue(ctx, noteArgs{N: 2}, nil)
		must(t, err)
		other, err := pgqueue.Claim(ctx, c, pgqueue.QueueDefault, 1)
		must(t, err)
		if len(other) != 1 {
			t.Fatalf("claimed %d jobs, want the second one", len(other))
		}
		before := read()
		both := []string{"complete", "complete"}
		written, err := pgqueue.FinishBatch(ctx, c, []*pgqueue.JobRow{stale, other[0]}, both)
		must(t, err)
		if written[stale.ID] || !written[other[0].ID] {
			t.Fatalf("written %v, want all but the stale completion of %d", written, stale.ID)
		}
		unchanged(t, "completion in a batch", before, read())
		written, err = pgqueue.FinishBatch(ctx, c, []*pgqueue.JobRow{holder, other[0]}, both)
		must(t, err)
		if !written[holder.ID] || read() == before {
			t.Fatalf("the holder's own completion in a batch did not land (written %v)", written)
		}
	})

	t.Run("Heartbeat", func(t *testing.T) {
		t.Parallel()
		c, _, read, stale, holder := setup(t)
		before := read()
		lost, _, err := pgqueue.Heartbeat(ctx, c, []*pgqueue.JobRow{stale})
		must(t, err)
		if !slices.Equal(lost, []int64{stale.ID}) {
			t.Fatalf("stale heartbeat found lost %v, want [%d]", lost, stale.ID)
		}
		unchanged(t, "heartbeat", before, read())
		lost, _, err = pgqueue.Heartbeat(ctx, c, []*pgqueue.JobRow{holder})
		must(t, err)
		if len(lost) != 0 || read() == before {
			t.Fatalf("the holder's own heartbeat did not renew its lease (lost %v)", lost)
		}
	})

	for _, checked := range []bool{false, true} {
		name := "CompleteTx"
		if checked {
			// CheckFenceTx passes: the holder has not checked the resource
			// yet. Only CompleteTx's own fence refuses.
			name = "CompleteTxAfterCheckFenceTx"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, pool, read, stale, holder := setup(t)
			before := read()
			complete := func(job *pgqueue.JobRow) error {
				tx, err := pool.Begin(ctx)
				must(t, err)
				defer tx.Rollback(ctx)
				if checked {
					must(t, c.CheckFenceTx(ctx, tx, "job-resource", job.Fence))
				}
				if err := c.CompleteTx(ctx, tx, job); err != nil {
					return err
				}
				return tx.Commit(ctx)
			}
			if err := complete(stale); !errors.Is(err, pgqueue.ErrJobLeaseLost) {
				t.Fatalf("stale CompleteTx: %v, want ErrJobLeaseLost", err)
			}
			unchanged(t, "CompleteTx", before, read())
			must(t, complete(holder))
			if read() == before {
				t.Fatal("the holder's own CompleteTx did not land")
			}
		})
	}
}
