package pgqueue_test

import (
	"context"
	"encoding/json"
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
