package pgqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// flowArgs is a job of a flow-limited queue; Customer is the field its
// partition key is derived from.
type flowArgs struct {
	Customer string `json:"customer"`
	N        int    `json:"n"`
}

func (flowArgs) Kind() string { return "flow_test" }

func enqueueFlow(t *testing.T, c *pgqueue.Client, queue, customer string, n int) int64 {
	t.Helper()
	res, err := c.Enqueue(context.Background(), flowArgs{Customer: customer, N: n}, &pgqueue.EnqueueOpts{Queue: queue})
	must(t, err)
	return res.ID
}

func TestQueueSetLimitsValidates(t *testing.T) {
	t.Parallel()
	b := setupControl(t)
	ctx := context.Background()
	for _, l := range []pgqueue.QueueLimits{
		{MaxRunning: -1},
		{MaxRunningPerKey: -2},
		{Rate: pgqueue.Rate{Limit: 5}},
		{Rate: pgqueue.Rate{Limit: 5, Period: time.Microsecond}},
		{Rate: pgqueue.Rate{Period: time.Second}},
		{Rate: pgqueue.Rate{PerKey: true}},
		{PartitionBy: pgqueue.PartitionBy{ArgsFields: []string{"a", "b", "c", "d", "e"}}},
		{PartitionBy: pgqueue.PartitionBy{ArgsFields: []string{""}}},
	} {
		if err := b.client.QueueSetLimits(ctx, "q", l); !errors.Is(err, pgqueue.ErrInvalid) {
			t.Errorf("QueueSetLimits(%+v) = %v, want ErrInvalid", l, err)
		}
	}
	if err := b.client.QueueSetLimits(ctx, "Bad Name", pgqueue.QueueLimits{MaxRunning: 1}); !errors.Is(err, pgqueue.ErrInvalid) {
		t.Errorf("invalid queue name: %v, want ErrInvalid", err)
	}
	want := pgqueue.QueueLimits{MaxRunning: 4, MaxRunningPerKey: 2, Rate: pgqueue.Rate{Limit: 10, Period: time.Minute, PerKey: true},
		PartitionBy: pgqueue.PartitionBy{Kind: true, ArgsFields: []string{"customer"}}, SequenceContinue: true}
	must(t, b.client.QueueSetLimits(ctx, "limited", want))
	qs, err := b.client.QueueList(ctx)
	must(t, err)
	if len(qs) != 1 || fmt.Sprintf("%+v", qs[0].Limits) != fmt.Sprintf("%+v", want) {
		t.Fatalf("QueueList: %+v, want one queue with limits %+v", qs, want)
	}
	must(t, b.client.QueueSetLimits(ctx, "limited", pgqueue.QueueLimits{}))
	qs, err = b.client.QueueList(ctx)
	must(t, err)
	if len(qs) != 1 || !qs[0].Limits.IsZero() {
		t.Fatalf("after removing the limits: %+v", qs[0].Limits)
	}
}

// TestClaimFlow checks each limit on single claims, where every count is
// known: what a claim takes, and what it leaves.
func TestClaimFlow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("MaxRunning", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		for i := range 10 {
			enqueueFlow(t, b.client, "q", "a", i)
		}
		must(t, b.client.QueueSetLimits(ctx, "q", pgqueue.QueueLimits{MaxRunning: 3}))
		// The plain claim refuses a limited queue: a producer that has not
		// yet seen the limits claims nothing rather than too much.
		if jobs, err := pgqueue.Claim(ctx, b.client, "q", 10); err != nil || len(jobs) != 0 {
			t.Fatalf("plain claim of a limited queue: %d jobs, %v", len(jobs), err)
		}
		jobs, backlog, err := pgqueue.ClaimFlow(ctx, b.client, "q", 10)
		must(t, err)
		if len(jobs) != 3 || !backlog {
			t.Fatalf("claimed %d (backlog %v), want 3 with a backlog", len(jobs), backlog)
		}
		if more, _, err := pgqueue.ClaimFlow(ctx, b.client, "q", 10); err != nil || len(more) != 0 {
			t.Fatalf("at the limit: claimed %d, %v", len(more), err)
		}
		n, err := pgqueue.Complete(ctx, b.client, jobs[:1])
		must(t, err)
		if n != 1 {
			t.Fatalf("completed %d", n)
		}
		more, _, err := pgqueue.ClaimFlow(ctx, b.client, "q", 10)
		must(t, err)
		if len(more) != 1 {
			t.Fatalf("after one completion: claimed %d, want 1", len(more))
		}
		held, err := b.client.QueueHeldBack(ctx, "q")
		must(t, err)
		if held.Running != 3 || !held.AtMaxRunning || held.Ready != 6 {
			t.Fatalf("held back: %+v, want 3 running, at max, 6 ready", held)
		}
	})

	// A limited claim locks no rows ahead of its update: a job that
	// another transaction cancels while the claim runs must stay
	// cancelled, never turn running under the cancel.
	t.Run("JobCancelledDuringTheClaim", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		first := enqueueFlow(t, b.client, "q", "a", 0)
		second := enqueueFlow(t, b.client, "q", "a", 1)
		must(t, b.client.QueueSetLimits(ctx, "q", pgqueue.QueueLimits{MaxRunning: 5}))
		cancel, err := b.pool.Begin(ctx)
		must(t, err)
		defer func() { _ = cancel.Rollback(ctx) }()
		_, err = cancel.Exec(ctx, `UPDATE pgqueue.jobs SET state = 'cancelled', finalized_at = now() WHERE id = $1`, first)
		must(t, err)
		type claimed struct {
			jobs []*pgqueue.JobRow
			err  error
		}
		done := make(chan claimed, 1)
		go func() {
			jobs, _, err := pgqueue.ClaimFlow(ctx, b.client, "q", 10)
			done <- claimed{jobs, err}
		}()
		// The claim either waits for the cancel's row lock (its snapshot
		// still shows the job available) or passes the row by; the cancel
		// commits only once it does one of the two.
		var got *claimed
		deadline := time.Now().Add(30 * time.Second)
		for got == nil {
			var waiting bool
			must(t, b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			        WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting))
			if waiting {
				break
			}
			select {
			case r := <-done:
				got = &r
			case <-time.After(5 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatal("the claim neither waited for the cancel's lock nor ended in 30 s")
			}
		}
		must(t, cancel.Commit(ctx))
		if got == nil {
			r := <-done
			got = &r
		}
		must(t, got.err)
		if ids := jobIDs(got.jobs); fmt.Sprint(ids) != fmt.Sprint([]int64{second}) {
			t.Fatalf("claimed %v, want only %d (job %d was cancelled meanwhile)", ids, second, first)
		}
		var state string
		must(t, b.pool.QueryRow(ctx, `SELECT state FROM pgqueue.jobs WHERE id = $1`, first).Scan(&state))
		if state != "cancelled" {
			t.Fatalf("job cancelled during the claim is %s", state)
		}
	})

	t.Run("MaxRunningPerKey", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		// Customer a has most of the backlog, and comes first.
		for i := range 6 {
			enqueueFlow(t, b.client, "q", "a", i)
		}
		enqueueFlow(t, b.client, "q", "b", 0)
		enqueueFlow(t, b.client, "q", "c", 0)
		must(t, b.client.QueueSetLimits(ctx, "q", pgqueue.QueueLimits{MaxRunningPerKey: 2,
			PartitionBy: pgqueue.PartitionBy{ArgsFields: []string{"customer"}}}))
		jobs, _, err := pgqueue.ClaimFlow(ctx, b.client, "q", 10)
		must(t, err)
		count := map[string]int{}
		for _, j := range jobs {
			var a struct{ Customer string }
			must(t, json.Unmarshal(j.EncodedArgs, &a))
			count[a.Customer]++
		}
		if len(jobs) != 4 || count["a"] != 2 || count["b"] != 1 || count["c"] != 1 {
			t.Fatalf("claimed %v, want a:2 b:1 c:1", count)
		}
		held, err := b.client.QueueHeldBack(ctx, "q")
		must(t, err)
		if held.ByKeyLimit != 4 || held.KeysAtLimit != 1 {
			t.Fatalf("held back: %+v, want 4 by the key limit, 1 key at it", held)
		}
		// One of a's two finishes: a has one slot, and four jobs waiting;
		// the claim takes one of them, not two.
		for _, j := range jobs {
			var a struct{ Customer string }
			must(t, json.Unmarshal(j.EncodedArgs, &a))
			if a.Customer == "a" {
				_, err := pgqueue.Complete(ctx, b.client, []*pgqueue.JobRow{j})
				must(t, err)
				break
			}
		}
		more, _, err := pgqueue.ClaimFlow(ctx, b.client, "q", 10)
		must(t, err)
		if len(more) != 1 {
			t.Fatalf("with one of customer a's two slots free: claimed %d, want 1", len(more))
		}
	})

	t.Run("Rate", func(t *testing.T) {
		skipInShortMode(t, "a rate limit's window of 2 s passing")
		t.Parallel()
		b := setupControl(t)
		for i := range 12 {
			enqueueFlow(t, b.client, "q", "a", i)
		}
		period := 2 * time.Second
		must(t, b.client.QueueSetLimits(ctx, "q", pgqueue.QueueLimits{Rate: pgqueue.Rate{Limit: 5, Period: period}}))
		start := time.Now()
		jobs, _, err := pgqueue.ClaimFlow(ctx, b.client, "q", 10)
		must(t, err)
		if len(jobs) != 5 {
			t.Fatalf("claimed %d, want the rate's 5", len(jobs))
		}
		_, err = pgqueue.Complete(ctx, b.client, jobs)
		must(t, err)
		// Finished or not, the starts count until they leave the window.
		if more, _, err := pgqueue.ClaimFlow(ctx, b.client, "q", 10); err != nil || (len(more) != 0 && time.Since(start) < period) {
			t.Fatalf("within the window: claimed %d, %v", len(more), err)
		}
		// The window is measured by the database's clock from the starts
		// it recorded (the jobs' attempted_at), not from start: under
		// load the first claim reached the server more than a margin
		// after start, and a claim at start+period+margin still found
		// its five starts in the window.
		last := jobs[0].AttemptedAt
		for _, j := range jobs {
			if j.AttemptedAt.After(last) {
				last = j.AttemptedAt
			}
		}
		waitFor(t, "the window to pass by the database's clock", func() bool {
			var passed bool
			must(t, b.pool.QueryRow(ctx, "SELECT clock_timestamp() > $1::timestamptz + $2::bigint * interval '1 microsecond'",
				last, period.Microseconds()).Scan(&passed))
			return passed
		})
		more, _, err := pgqueue.ClaimFlow(ctx, b.client, "q", 10)
		must(t, err)
		if len(more) != 5 {
			t.Fatalf("after the window: claimed %d, want 5", len(more))
		}
	})

	t.Run("RatePerKey", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		for i := range 4 {
			enqueueFlow(t, b.client, "q", "a", i)
			enqueueFlow(t, b.client, "q", "b", i)
		}
		must(t, b.client.QueueSetLimits(ctx, "q", pgqueue.QueueLimits{Rate: pgqueue.Rate{Limit: 1, Period: time.Hour, PerKey: true},
			PartitionBy: pgqueue.PartitionBy{ArgsFields: []string{"customer"}}}))
		jobs, _, err := pgqueue.ClaimFlow(ctx, b.client, "q", 10)
		must(t, err)
		if len(jobs) != 2 {
			t.Fatalf("claimed %d, want one per key", len(jobs))
		}
		if more, _, err := pgqueue.ClaimFlow(ctx, b.client, "q", 10); err != nil || len(more) != 0 {
			t.Fatalf("each key used its rate: claimed %d, %v", len(more), err)
		}
		held, err := b.client.QueueHeldBack(ctx, "q")
		must(t, err)
		if held.ByKeyRate != 6 {
			t.Fatalf("held back: %+v, want 6 by the keys' rate", held)
		}
	})

	t.Run("SequenceOneAtATimeInOrder", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		var ids []int64
		for i := range 3 {
			ids = append(ids, enqueueFlow(t, b.client, "q", "a", i))
		}
		other := enqueueFlow(t, b.client, "q", "b", 0)
		_, err := b.pool.Exec(ctx, `UPDATE pgqueue.jobs SET sequence_key = 's' WHERE id = ANY ($1)`, ids)
		must(t, err)
		for step, id := range ids {
			jobs, err := pgqueue.Claim(ctx, b.client, "q", 10)
			must(t, err)
			want := []int64{id}
			if step == 0 {
				want = []int64{id, other}
			}
			if got := jobIDs(jobs); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("step %d: claimed %v, want %v", step, got, want)
			}
			if more, err := pgqueue.Claim(ctx, b.client, "q", 10); err != nil || len(more) != 0 {
				t.Fatalf("step %d: while job %d runs, claimed %v, %v", step, id, jobIDs(more), err)
			}
			for _, j := range jobs {
				if j.ID == id {
					if _, err := pgqueue.Complete(ctx, b.client, []*pgqueue.JobRow{j}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	})

	t.Run("SequenceHeldByDiscarded", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		first := b.jobIn(t, pgqueue.StateDiscarded, nil)
		second := enqueueFlow(t, b.client, "q2", "a", 0)
		_, err := b.pool.Exec(ctx, `UPDATE pgqueue.jobs SET sequence_key = 's', queue = 'q2' WHERE id = ANY ($1)`, []int64{first, second})
		must(t, err)
		if jobs, err := pgqueue.Claim(ctx, b.client, "q2", 10); err != nil || len(jobs) != 0 {
			t.Fatalf("behind a discarded job: claimed %v, %v; want nothing by default", jobIDs(jobs), err)
		}
		held, err := b.client.QueueHeldBack(ctx, "q2")
		must(t, err)
		if held.InSequence != 1 {
			t.Fatalf("held back: %+v, want 1 in a sequence", held)
		}
		must(t, b.client.QueueSetLimits(ctx, "q2", pgqueue.QueueLimits{SequenceContinue: true}))
		jobs, err := pgqueue.Claim(ctx, b.client, "q2", 10)
		must(t, err)
		if fmt.Sprint(jobIDs(jobs)) != fmt.Sprint([]int64{second}) {
			t.Fatalf("with SequenceContinue: claimed %v, want %d", jobIDs(jobs), second)
		}
	})

	// A job of a sequence waiting for a later job of its sequence could
	// never start: a batch with sequence keys lists parents first, or is
	// refused whole.
	t.Run("SequenceBatchListsParentsFirst", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		seq := func(n int, deps ...pgqueue.Dependency) pgqueue.EnqueueManyParams {
			return pgqueue.EnqueueManyParams{Args: flowArgs{Customer: "a", N: n},
				Opts: &pgqueue.EnqueueOpts{Queue: "q4", SequenceKey: "s", DependsOn: deps}}
		}
		_, err := b.client.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{seq(1, pgqueue.DependsOnIndex(1)), seq(2)})
		if !errors.Is(err, pgqueue.ErrInvalid) {
			t.Fatalf("a sequence's job depending on a later one: %v, want ErrInvalid", err)
		}
		if n := countJobs(t, b.pool, "queue = 'q4'"); n != 0 {
			t.Fatalf("%d jobs written by a refused batch", n)
		}
		res, err := b.client.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{seq(1), seq(2, pgqueue.DependsOnIndex(0))})
		must(t, err)
		if len(res.IDs) != 2 {
			t.Fatalf("parents first: %d ids", len(res.IDs))
		}
	})

	// A blocked job waits to run: the later jobs of its sequence wait for
	// it, whether or not the queue continues past failed jobs, and start
	// in order once it is released and has run.
	t.Run("SequenceHeldByBlocked", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		parent := enqueueFlow(t, b.client, "elsewhere", "p", 0)
		first, err := b.client.Enqueue(ctx, flowArgs{Customer: "a", N: 1}, &pgqueue.EnqueueOpts{Queue: "q3", SequenceKey: "s",
			DependsOn: []pgqueue.Dependency{pgqueue.DependsOnJob(parent)}})
		must(t, err)
		if first.State != pgqueue.StateBlocked {
			t.Fatalf("first job %s, want blocked", first.State)
		}
		second, err := b.client.Enqueue(ctx, flowArgs{Customer: "a", N: 2}, &pgqueue.EnqueueOpts{Queue: "q3", SequenceKey: "s"})
		must(t, err)
		for _, cont := range []bool{false, true} {
			must(t, b.client.QueueSetLimits(ctx, "q3", pgqueue.QueueLimits{SequenceContinue: cont}))
			if jobs, err := pgqueue.Claim(ctx, b.client, "q3", 10); err != nil || len(jobs) != 0 {
				t.Fatalf("SequenceContinue %v: behind a blocked job, claimed %v, %v; want nothing", cont, jobIDs(jobs), err)
			}
		}
		p, err := pgqueue.Claim(ctx, b.client, "elsewhere", 10)
		must(t, err)
		_, err = pgqueue.Complete(ctx, b.client, p)
		must(t, err)
		for _, want := range []int64{first.ID, second.ID} {
			jobs, err := pgqueue.Claim(ctx, b.client, "q3", 10)
			must(t, err)
			if fmt.Sprint(jobIDs(jobs)) != fmt.Sprint([]int64{want}) {
				t.Fatalf("after the release: claimed %v, want %d", jobIDs(jobs), want)
			}
			_, err = pgqueue.Complete(ctx, b.client, jobs)
			must(t, err)
		}
	})
}

func jobIDs(jobs []*pgqueue.JobRow) []int64 {
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	slices.Sort(ids) // a claim returns its rows in no set order
	return ids
}

// TestFlowLimitsRunningClients runs two clients of ten workers each on a
// queue limited to three running jobs, two per customer, and checks from
// the handlers' own counts that no limit was passed and every job ran.
func TestFlowLimitsRunningClients(t *testing.T) {
	skipInShortMode(t, "flow limits kept by running clients")
	t.Parallel()
	runLimitedClients(t, newPool(t))
}

// runLimitedClients is TestFlowLimitsRunningClients on pool.
func runLimitedClients(t *testing.T, pool *pgxpool.Pool) {
	ctx := context.Background()
	var running atomic.Int64
	var mu sync.Mutex
	perKey := map[string]int{}
	peak, keyPeak := int64(0), 0
	var done atomic.Int64
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[flowArgs]) error {
		n := running.Add(1)
		mu.Lock()
		peak = max(peak, n)
		perKey[job.Args.Customer]++
		keyPeak = max(keyPeak, perKey[job.Args.Customer])
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		perKey[job.Args.Customer]--
		mu.Unlock()
		running.Add(-1)
		done.Add(1)
		return nil
	}, nil))
	setup := newClient(t, pool, nil)
	must(t, setup.QueueSetLimits(ctx, "limited", pgqueue.QueueLimits{MaxRunning: 3, MaxRunningPerKey: 2,
		PartitionBy: pgqueue.PartitionBy{ArgsFields: []string{"customer"}}}))
	const jobs = 60
	for i := range jobs {
		enqueueFlow(t, setup, "limited", []string{"a", "b", "c"}[i%3], i)
	}
	for range 2 {
		c := newClient(t, pool, &pgqueue.Config{Workers: ws, Queues: map[string]pgqueue.QueueConfig{"limited": {MaxWorkers: 10}},
			FetchPollInterval: 50 * time.Millisecond})
		must(t, c.Start(ctx))
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
	}
	deadline := time.Now().Add(2 * time.Minute)
	for done.Load() < jobs && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if done.Load() != jobs {
		t.Fatalf("%d of %d jobs ran in 2 minutes", done.Load(), jobs)
	}
	mu.Lock()
	defer mu.Unlock()
	if peak > 3 || keyPeak > 2 {
		t.Fatalf("peak running %d (limit 3), per customer %d (limit 2)", peak, keyPeak)
	}
}

// TestSequencesRunningClients runs three sequences of ten jobs on two
// clients of five workers each, in a queue without limits: the poll tells
// the producers the queue holds sequence jobs, so they claim under the
// lock; each sequence must run one job at a time, in id order.
func TestSequencesRunningClients(t *testing.T) {
	skipInShortMode(t, "sequences kept in order by running clients")
	t.Parallel()
	pool := newPool(t)
	ctx := context.Background()
	var mu sync.Mutex
	runningIn := map[string]int{}
	order := map[string][]int64{}
	overlap := ""
	var done atomic.Int64
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[flowArgs]) error {
		seq := job.Args.Customer
		mu.Lock()
		runningIn[seq]++
		if runningIn[seq] > 1 {
			overlap = fmt.Sprintf("sequence %s ran %d jobs at once", seq, runningIn[seq])
		}
		order[seq] = append(order[seq], job.ID)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		runningIn[seq]--
		mu.Unlock()
		done.Add(1)
		return nil
	}, nil))
	setup := newClient(t, pool, nil)
	want := map[string][]int64{}
	for i := range 30 {
		seq := []string{"s1", "s2", "s3"}[i%3]
		res, err := setup.Enqueue(ctx, flowArgs{Customer: seq, N: i}, &pgqueue.EnqueueOpts{Queue: "seq", SequenceKey: seq})
		must(t, err)
		want[seq] = append(want[seq], res.ID)
	}
	for range 2 {
		c := newClient(t, pool, &pgqueue.Config{Workers: ws, Queues: map[string]pgqueue.QueueConfig{"seq": {MaxWorkers: 5}},
			FetchPollInterval: 50 * time.Millisecond})
		must(t, c.Start(ctx))
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
	}
	deadline := time.Now().Add(2 * time.Minute)
	for done.Load() < 30 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if done.Load() != 30 {
		t.Fatalf("%d of 30 jobs ran in 2 minutes", done.Load())
	}
	if overlap != "" {
		t.Fatal(overlap)
	}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("ran in order %v, want %v", order, want)
	}
}

// TestLimitedQueueStartsWithoutWaitingForAPoll checks that a client learns
// its queues' flow limits when it starts: until it does, its claims run
// claim.sql, which takes nothing of a limited queue. With an hour between
// polls, the jobs waiting at start run only thanks to the poll at start.
func TestLimitedQueueStartsWithoutWaitingForAPoll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, c := newHourPollClient(t)
	must(t, c.QueueSetLimits(ctx, "q", pgqueue.QueueLimits{MaxRunning: 1}))
	for i := range 3 {
		enqueueFlow(t, c, "q", "a", i)
	}
	must(t, c.Start(ctx))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	waitFor(t, "three completed", func() bool { return countJobs(t, pool, "state = 'completed'") == 3 })
}

// newHourPollClient is a client of queue "q" (two workers of no-op
// flowArgs jobs) that polls once at start and then once an hour: in a
// test, no job of it waits for a poll.
func newHourPollClient(t *testing.T) (*pgxpool.Pool, *pgqueue.Client) {
	t.Helper()
	pool := newPool(t)
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[flowArgs]) error { return nil }, nil))
	return pool, newClient(t, pool, &pgqueue.Config{Workers: ws, Queues: map[string]pgqueue.QueueConfig{"q": {MaxWorkers: 2}},
		FetchPollInterval: time.Hour})
}

// TestSequenceStartsNextWithoutWaitingForAPoll runs a sequence of five
// jobs with an hour between polls: each written result must wake the
// producer for the sequence's next job (a claim taken meanwhile found it
// not yet next), so the sequence ends in seconds, not hours.
func TestSequenceStartsNextWithoutWaitingForAPoll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, c := newHourPollClient(t)
	for i := range 5 {
		_, err := c.Enqueue(ctx, flowArgs{Customer: "a", N: i}, &pgqueue.EnqueueOpts{Queue: "q", SequenceKey: "s"})
		must(t, err)
	}
	must(t, c.Start(ctx))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	waitFor(t, "the sequence's five jobs completed", func() bool { return countJobs(t, pool, "state = 'completed'") == 5 })
}

// TestFlowKeyDerivation pins the partition keys flow_key derives: they
// are stored (flow_rates keeps each key's recent starts), so a rewrite of
// the function must give the same text for the same job.
func TestFlowKeyDerivation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	for _, tc := range []struct {
		partitionKey *string
		byKind       bool
		byArgs       []string
		want         *string
	}{
		{partitionKey: ptr("own"), byKind: true, byArgs: []string{"a"}, want: ptr("own")},
		{byKind: false, byArgs: []string{}, want: nil},
		{byKind: true, byArgs: []string{}, want: ptr("k")},
		{byKind: false, byArgs: []string{"a"}, want: ptr(`"x"`)},
		{byKind: true, byArgs: []string{"a", "b", "missing", "c"}, want: ptr("k\x1f\"x\"\x1f1\x1fnull\x1f{\"d\": [1, 2]}")},
	} {
		var got *string
		must(t, pool.QueryRow(ctx, `SELECT pgqueue.flow_key($1, 'k', '{"a": "x", "b": 1, "c": {"d": [1, 2]}}', $2, $3)`,
			tc.partitionKey, tc.byKind, tc.byArgs).Scan(&got))
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("flow_key(%v, by kind %v, by args %v) = %q, want %q", tc.partitionKey, tc.byKind, tc.byArgs, deref(got), deref(tc.want))
		}
	}
}

func ptr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}
