package pgqueue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/pgqueuetest"
)

type obsArgs struct {
	Mode string `json:"mode"`
}

func (obsArgs) Kind() string { return "obs" }

// observed records what an Observer is told.
type observed struct {
	mu       sync.Mutex
	claimed  int
	written  int
	results  map[pgqueue.Outcome]int
	refused  map[string]int
	refusedJ []int64 // the jobs of the refused writes
	rescued  []pgqueue.RescuedJob
	queues   [][]*pgqueue.QueueInfo
	changed  chan struct{}
	observer *pgqueue.Observer
}

func newObserved() *observed {
	o := &observed{results: map[pgqueue.Outcome]int{}, refused: map[string]int{}, changed: make(chan struct{}, 1)}
	note := func(f func()) {
		o.mu.Lock()
		f()
		o.mu.Unlock()
		select {
		case o.changed <- struct{}{}:
		default:
		}
	}
	o.observer = &pgqueue.Observer{
		Claimed:        func(_ string, n int) { note(func() { o.claimed += n }) },
		BatchWritten:   func(n int) { note(func() { o.written += n }) },
		ResultRecorded: func(_ *pgqueue.JobRow, r pgqueue.Outcome) { note(func() { o.results[r]++ }) },
		WriteRefused: func(j *pgqueue.JobRow, write pgqueue.FencedWrite) {
			note(func() {
				o.refused[string(write)]++
				o.refusedJ = append(o.refusedJ, j.ID)
			})
		},
		Rescued: func(j pgqueue.RescuedJob) { note(func() { o.rescued = append(o.rescued, j) }) },
		Queues:  func(qs []*pgqueue.QueueInfo) { note(func() { o.queues = append(o.queues, qs) }) },
	}
	return o
}

// await waits until cond, read under the lock, holds.
func (o *observed) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		o.mu.Lock()
		ok := cond()
		o.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-o.changed:
		case <-deadline:
			o.mu.Lock()
			defer o.mu.Unlock()
			t.Fatalf("observer never saw %s (claimed %d, written %d, results %v, refused %v, rescued %+v)",
				what, o.claimed, o.written, o.results, o.refused, o.rescued)
		}
	}
}

func TestObserver(t *testing.T) {
	t.Parallel()

	t.Run("ResultsClaimsAndBatches", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		o := newObserved()
		workers := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[obsArgs]) error {
			switch job.Args.Mode {
			case "fail":
				return errors.New("boom")
			case "cancel":
				return pgqueue.JobCancel(errors.New("no longer wanted"))
			case "snooze":
				return pgqueue.JobSnooze(time.Hour)
			}
			return nil
		}, nil))
		b := startClient(t, pool, workers, &pgqueue.Config{Observer: o.observer})
		for _, mode := range []string{"ok", "fail", "cancel", "snooze"} {
			opts := &pgqueue.EnqueueOpts{}
			if mode == "fail" {
				opts.MaxAttempts = 2
			}
			_, err := b.client.Enqueue(t.Context(), obsArgs{Mode: mode}, opts)
			must(t, err)
		}
		// ok, fail twice (retried, then discarded), cancel, snooze.
		// Written follows each batch's Recorded calls.
		o.await(t, "five results", func() bool { return o.written == 5 })
		o.mu.Lock()
		defer o.mu.Unlock()
		want := map[pgqueue.Outcome]int{pgqueue.OutcomeCompleted: 1, pgqueue.OutcomeRetried: 1, pgqueue.OutcomeDiscarded: 1,
			pgqueue.OutcomeCancelled: 1, pgqueue.OutcomeSnoozed: 1}
		for r, n := range want {
			if o.results[r] != n {
				t.Errorf("%s: %d, want %d (all: %v)", r, o.results[r], n, o.results)
			}
		}
		if o.claimed != 5 {
			t.Errorf("claimed %d jobs, want 5", o.claimed)
		}
	})

	t.Run("QueuesFromTheLeader", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		o := newObserved()
		o.observer.QueuesInterval = 50 * time.Millisecond
		c := newClient(t, pool, &pgqueue.Config{Observer: o.observer})
		at := time.Now().Add(time.Hour)
		_, err := c.Enqueue(t.Context(), obsArgs{}, &pgqueue.EnqueueOpts{Queue: "later", RunAt: at})
		must(t, err)
		pgqueuetest.RequireEnqueued(t.Context(), t, pool, obsArgs{}, &pgqueuetest.Match{Queue: "later", ScheduledAt: at, State: pgqueue.StateScheduled})
		must(t, c.Start(t.Context()))
		o.await(t, "queue counts", func() bool {
			for _, qs := range o.queues {
				for _, q := range qs {
					if q.Name == "later" && q.Scheduled == 1 {
						return true
					}
				}
			}
			return false
		})
		must(t, c.Stop(t.Context()))
		o.mu.Lock()
		defer o.mu.Unlock()
		if last := o.queues[len(o.queues)-1]; last != nil {
			t.Errorf("last report after the term ended: %v, want nil", last)
		}
	})

	t.Run("RescuedAndRefused", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "the observer's rescued and refused events")
		pool := newPool(t)
		o := newObserved()
		// A client that claims and dies: its lease runs out unrenewed.
		dead := newClient(t, pool, &pgqueue.Config{ID: "dead-client", JobLease: time.Second})
		res, err := dead.Enqueue(t.Context(), obsArgs{Mode: "stuck"}, &pgqueue.EnqueueOpts{Queue: "stuck"})
		must(t, err)
		claimed, err := pgqueue.Claim(t.Context(), dead, "stuck", 1)
		must(t, err)
		if len(claimed) != 1 {
			t.Fatalf("claimed %d jobs, want 1", len(claimed))
		}

		// A running job taken over under its handler: the result it
		// writes is refused.
		started, release := make(chan int64), make(chan struct{})
		workers := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[obsArgs]) error {
			started <- job.ID
			<-release
			return nil
		}, nil))
		b := startClient(t, pool, workers, &pgqueue.Config{Observer: o.observer, RescueInterval: 100 * time.Millisecond})
		_, err = b.client.Enqueue(t.Context(), obsArgs{Mode: "taken"}, nil)
		must(t, err)
		id := <-started
		_, err = pool.Exec(t.Context(), "UPDATE pgqueue.jobs SET fence = nextval('pgqueue.fence_seq') WHERE id = $1", id)
		must(t, err)
		close(release)

		// One refusal: the result's, or a heartbeat's (the listen
		// connection's first connect nudges one) that then drops the
		// result; never both.
		o.await(t, "the rescue and the refusal", func() bool {
			return len(o.rescued) == 1 && o.refused["result"]+o.refused["heartbeat"] == 1
		})
		o.mu.Lock()
		defer o.mu.Unlock()
		if len(o.refusedJ) != 1 {
			t.Errorf("%d refused writes, want 1: one lost claim is reported once", len(o.refusedJ))
		}
		for _, j := range o.refusedJ {
			if j != id {
				t.Errorf("a write about job %d refused, want only the taken job %d's", j, id)
			}
		}
		got := o.rescued[0]
		want := pgqueue.RescuedJob{ID: res.ID, Queue: "stuck", Kind: "obs", Holder: "dead-client", State: pgqueue.StateScheduled}
		if got != want {
			t.Errorf("rescued %+v, want %+v", got, want)
		}
	})
}
