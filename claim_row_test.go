package pgqueue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/pgqueuetest"
)

// TestClaimedRowAsStored: the claims return empty errors, tags and meta as
// NULL (sparing the server their output); a handler must still see each
// job's errors, tags and meta as stored, empty or not, whichever statement
// claimed it: claim.sql (a queue without limits), claim_flow.sql (a
// limited queue) or claim_id.sql (pgqueuetest.WorkJob).
func TestClaimedRowAsStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type seen struct{ errors, tags, meta string }
	asStored := func(t *testing.T, j *pgqueue.JobRow) seen {
		t.Helper()
		errs, err := json.Marshal(j.Errors)
		must(t, err)
		tags, err := json.Marshal(j.Tags)
		must(t, err)
		return seen{string(errs), string(tags), string(j.Meta)}
	}
	// Enqueues an empty job, one with tags and meta, and one with errors
	// from earlier attempts; returns what JobGet reads of each.
	enqueue := func(t *testing.T, c *pgqueue.Client, pool *pgxpool.Pool, queue string) map[int64]seen {
		t.Helper()
		want := map[int64]seen{}
		var ids []int64
		for i, opts := range []*pgqueue.EnqueueOpts{
			{Queue: queue},
			{Queue: queue, Tags: []string{"a", "b c"}, Meta: map[string]any{"tenant": 7, "nested": []any{1, "x"}}},
			{Queue: queue, Tags: []string{}, Meta: map[string]any{}},
		} {
			res, err := c.Enqueue(ctx, noteArgs{N: i}, opts)
			must(t, err)
			ids = append(ids, res.ID)
		}
		_, err := pool.Exec(ctx, `UPDATE pgqueue.jobs SET errors = '[{"attempt":1,"at":"2026-12-01T00:00:00Z","error":"boom"}]' WHERE id = $1`, ids[2])
		must(t, err)
		for _, id := range ids {
			j, err := c.JobGet(ctx, id)
			must(t, err)
			want[id] = asStored(t, j)
		}
		if want[ids[0]] != (seen{"null", "[]", "{}"}) {
			t.Fatalf("an empty job reads %+v from JobGet", want[ids[0]])
		}
		return want
	}
	check := func(t *testing.T, want, got map[int64]seen) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("handlers saw %+v,\nJobGet reads %+v", got, want)
		}
	}
	recorder := func(mu *sync.Mutex, got map[int64]seen, t *testing.T) *pgqueue.Workers {
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(_ context.Context, j *pgqueue.Job[noteArgs]) error {
			mu.Lock()
			defer mu.Unlock()
			got[j.ID] = asStored(t, j.JobRow)
			return nil
		}, nil))
		return ws
	}

	for _, limited := range []bool{false, true} {
		name := "Claim"
		if limited {
			name = "ClaimFlow"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pool := newPool(t)
			setup := newClient(t, pool, nil)
			if limited {
				must(t, setup.QueueSetLimits(ctx, pgqueue.QueueDefault, pgqueue.QueueLimits{MaxRunning: 10}))
			}
			want := enqueue(t, setup, pool, pgqueue.QueueDefault)
			var mu sync.Mutex
			got := map[int64]seen{}
			startClient(t, pool, recorder(&mu, got, t), nil)
			waitFor(t, "the jobs to complete", func() bool {
				return countJobs(t, pool, "state = 'completed'") == len(want)
			})
			mu.Lock()
			defer mu.Unlock()
			check(t, want, got)
		})
	}
	t.Run("WorkJob", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		var mu sync.Mutex
		got := map[int64]seen{}
		c := newClient(t, pool, &pgqueue.Config{Workers: recorder(&mu, got, t), JobLease: time.Minute})
		want := enqueue(t, c, pool, pgqueue.QueueDefault)
		for id := range want {
			if r := pgqueuetest.WorkJob(ctx, t, c, id); r.Result != pgqueue.OutcomeCompleted {
				t.Fatalf("job %d: %v (%v)", id, r.Result, r.Err)
			}
		}
		check(t, want, got)
	})
}

// TestClaimedJobRowAsStored: a handler's JobRow is the row as stored
// while the job runs, column by column, whichever statement claimed it,
// although claim.sql leaves out what the claimer knows (queue, state,
// worker id, lease end, finalized time) and fills it in.
func TestClaimedJobRowAsStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, name := range []string{"Claim", "ClaimFlow", "WorkJob"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pool := newPool(t)
			var mu sync.Mutex
			var diffs []string
			seen := 0
			ws := pgqueue.NewWorkers()
			var client *pgqueue.Client
			must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, j *pgqueue.Job[noteArgs]) error {
				stored, err := client.JobGet(ctx, j.ID)
				mu.Lock()
				defer mu.Unlock()
				seen++
				if err != nil {
					diffs = append(diffs, err.Error())
					return nil
				}
				diffs = append(diffs, jobRowDiff(j.JobRow, stored)...)
				return nil
			}, nil))
			queue := "rows"
			// PollOnly: a listening client heartbeats once its LISTEN
			// connects, which may renew a running job's lease before JobGet
			// reads it.
			c := newClient(t, pool, &pgqueue.Config{Workers: ws, JobLease: 90*time.Second + 1500*time.Nanosecond, ID: "row-checker",
				PollOnly: true, FetchPollInterval: 50 * time.Millisecond,
				Queues: map[string]pgqueue.QueueConfig{queue: {MaxWorkers: 4}}})
			client = c
			if name == "ClaimFlow" {
				must(t, c.QueueSetLimits(ctx, queue, pgqueue.QueueLimits{MaxRunning: 10}))
			}
			var ids []int64
			for i, opts := range []*pgqueue.EnqueueOpts{
				{Queue: queue},
				{Queue: queue, Priority: 3, MaxAttempts: 7, Tags: []string{"a"}, Meta: map[string]any{"k": 1}},
				{Queue: queue, PartitionKey: "p1"},
				{Queue: queue, SequenceKey: "s1"},
			} {
				res, err := c.Enqueue(ctx, noteArgs{N: i}, opts)
				must(t, err)
				ids = append(ids, res.ID)
			}
			if name == "WorkJob" {
				for _, id := range ids {
					if r := pgqueuetest.WorkJob(ctx, t, c, id); r.Result != pgqueue.OutcomeCompleted {
						t.Fatalf("job %d: %v (%v)", id, r.Result, r.Err)
					}
				}
			} else {
				must(t, c.Start(ctx))
				t.Cleanup(func() { _ = c.Stop(context.Background()) })
				waitFor(t, "the jobs to complete", func() bool {
					return countJobs(t, pool, "state = 'completed'") == len(ids)
				})
			}
			mu.Lock()
			defer mu.Unlock()
			if seen != len(ids) {
				t.Fatalf("handlers ran %d times, want %d", seen, len(ids))
			}
			for _, d := range diffs {
				t.Error(d)
			}
		})
	}
}

// jobRowDiff lists the fields in which a handler's row differs from the
// stored one (times compared as instants).
func jobRowDiff(got, want *pgqueue.JobRow) []string {
	var out []string
	times := func(name string, a, b time.Time) {
		if !a.Equal(b) {
			out = append(out, fmt.Sprintf("job %d: %s %v, stored %v", want.ID, name, a, b))
		}
	}
	times("RunAt", got.RunAt, want.RunAt)
	times("LeaseUntil", got.LeaseUntil, want.LeaseUntil)
	times("CreatedAt", got.CreatedAt, want.CreatedAt)
	times("AttemptedAt", got.AttemptedAt, want.AttemptedAt)
	times("FinalizedAt", got.FinalizedAt, want.FinalizedAt)
	g, w := *got, *want
	g.RunAt, g.LeaseUntil, g.CreatedAt, g.AttemptedAt, g.FinalizedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
	w.RunAt, w.LeaseUntil, w.CreatedAt, w.AttemptedAt, w.FinalizedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if !reflect.DeepEqual(g, w) {
		out = append(out, fmt.Sprintf("job %d: handler's row %+v,\nstored %+v", want.ID, g, w))
	}
	return out
}
