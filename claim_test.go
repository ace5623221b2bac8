package pgqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// TestClaim checks which jobs a claim takes first.
func TestClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("OrdersByPriorityThenRunAt", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		base := time.Now().Add(-time.Hour)
		type spec struct {
			n        int
			priority int16
			age      time.Duration
		}
		specs := []spec{{0, 2, 0}, {1, 0, 3 * time.Minute}, {2, 1, 0}, {3, 0, 1 * time.Minute}, {4, 2, 5 * time.Minute}, {5, 0, 2 * time.Minute}, {6, 1, time.Minute}}
		for _, s := range specs {
			_, err := c.Enqueue(ctx, noteArgs{N: s.n}, &pgqueue.EnqueueOpts{Priority: s.priority, RunAt: base.Add(-s.age)})
			must(t, err)
		}
		// Claim one job at a time, as sql/claim.sql orders them. (A started
		// client runs the jobs of a claim concurrently: the order of
		// execution is not the claim order.)
		var order []int
		for range specs {
			jobs, err := pgqueue.Claim(ctx, c, pgqueue.QueueDefault, 1)
			must(t, err)
			if len(jobs) != 1 {
				t.Fatalf("claim returned %d jobs", len(jobs))
			}
			var args struct{ N int }
			must(t, json.Unmarshal(jobs[0].EncodedArgs, &args))
			order = append(order, args.N)
		}
		want := []int{1, 5, 3, 6, 2, 4, 0}
		if !slices.Equal(order, want) {
			t.Fatalf("order %v, want %v", order, want)
		}
	})
}

// TestClaimsExactlyOnce runs 8 clients of 4 workers each on one queue and
// counts every claim with a trigger: each of 20,000 jobs must be claimed
// exactly once and completed.
func TestClaimsExactlyOnce(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "8 clients claiming 20,000 jobs, each exactly once")
	ctx := context.Background()
	pool := newPool(t)
	_, err := pool.Exec(ctx, `
		CREATE TABLE claim_audit (job_id bigint NOT NULL, fence bigint NOT NULL);
		CREATE FUNCTION audit_claim() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO claim_audit VALUES (NEW.id, NEW.fence);
			RETURN NEW;
		END $$;
		CREATE TRIGGER audit_claim AFTER UPDATE OF state ON pgqueue.jobs
			FOR EACH ROW WHEN (NEW.state = 'running') EXECUTE FUNCTION audit_claim();`)
	must(t, err)

	jobs := 20_000
	if testing.Short() {
		jobs = 4_000
	}
	var handled atomic.Int64
	for i := range 8 {
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			handled.Add(1)
			return nil
		}, nil))
		startClient(t, pool, ws, &pgqueue.Config{
			ID:     fmt.Sprintf("client-%d", i),
			Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 4}},
		})
	}
	// Enqueued once every client is up, so that all of them compete for
	// the jobs from the first claim on.
	params := make([]pgqueue.EnqueueManyParams, jobs)
	for i := range params {
		params[i] = pgqueue.EnqueueManyParams{Args: noteArgs{N: i}, Opts: &pgqueue.EnqueueOpts{Priority: int16(i % 3)}}
	}
	_, err = newClient(t, pool, nil).EnqueueMany(ctx, params)
	must(t, err)
	deadline := time.Now().Add(3 * time.Minute)
	for countJobs(t, pool, "state = 'completed'") < jobs {
		if time.Now().After(deadline) {
			t.Fatal(errors.New("jobs not all completed in time"))
		}
		time.Sleep(100 * time.Millisecond)
	}

	var claims, distinct, fences int
	must(t, pool.QueryRow(ctx, "SELECT count(*), count(DISTINCT job_id), count(DISTINCT fence) FROM claim_audit").Scan(&claims, &distinct, &fences))
	if claims != jobs || distinct != jobs || fences != jobs {
		t.Fatalf("claims %d, distinct jobs %d, distinct fences %d; want %d each", claims, distinct, fences, jobs)
	}
	if h := handled.Load(); h != int64(jobs) {
		t.Fatalf("handler ran %d times, want %d", h, jobs)
	}
	if n := countJobs(t, pool, "attempt <> 1"); n != 0 {
		t.Fatalf("%d jobs with attempt other than 1", n)
	}
	var workers int
	must(t, pool.QueryRow(ctx, "SELECT count(DISTINCT worker_id) FROM pgqueue.jobs").Scan(&workers))
	t.Logf("%d jobs, %d claims, worked by %d clients", jobs, claims, workers)
	if workers != 8 {
		t.Fatalf("jobs worked by %d of 8 clients: the claims did not compete", workers)
	}
}
