package pgqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

type chargeArgs struct {
	Order    int    `json:"order"`
	Customer string `json:"customer"`
	Note     string `json:"note,omitempty"`
}

func (chargeArgs) Kind() string { return "charge" }

// TestUnique checks what makes two jobs equal, and that a duplicate returns
// the existing job instead of an error.
func TestUnique(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	enqueue := func(t *testing.T, c *pgqueue.Client, args pgqueue.JobArgs, opts *pgqueue.EnqueueOpts) *pgqueue.EnqueueResult {
		t.Helper()
		res, err := c.Enqueue(ctx, args, opts)
		must(t, err)
		return res
	}

	t.Run("ByKindAlone", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		first := enqueue(t, c, chargeArgs{Order: 1}, &pgqueue.EnqueueOpts{Unique: &pgqueue.UniqueOpts{}})
		second := enqueue(t, c, chargeArgs{Order: 2}, &pgqueue.EnqueueOpts{Unique: &pgqueue.UniqueOpts{}})
		if first.Duplicate || !second.Duplicate || second.ID != first.ID {
			t.Fatalf("first %+v, second %+v: want the second a duplicate of the first", first, second)
		}
		if n := countJobs(t, pool, "kind = 'charge'"); n != 1 {
			t.Fatalf("%d rows", n)
		}
		// A job that is not unique is never a duplicate.
		if res := enqueue(t, c, chargeArgs{Order: 1}, nil); res.Duplicate {
			t.Fatal("a job without Unique came back a duplicate")
		}
	})

	t.Run("ByArgs", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		u := &pgqueue.EnqueueOpts{Unique: &pgqueue.UniqueOpts{ByArgs: true}}
		a := enqueue(t, c, chargeArgs{Order: 1, Customer: "ada"}, u)
		if enqueue(t, c, chargeArgs{Order: 1, Customer: "ada"}, u).ID != a.ID {
			t.Fatal("equal args inserted twice")
		}
		if enqueue(t, c, chargeArgs{Order: 2, Customer: "ada"}, u).Duplicate {
			t.Fatal("different args counted as a duplicate")
		}
		// Field order and white space of the encoding do not matter.
		m1 := map[string]any{"b": 1, "a": []any{1, 2}}
		if enqueue(t, c, rawArgs{m1}, u).Duplicate {
			t.Fatal("first map args a duplicate")
		}
		if !enqueue(t, c, rawArgs{map[string]any{"a": []any{1, 2}, "b": 1}}, u).Duplicate {
			t.Fatal("equal map args inserted twice")
		}
	})

	t.Run("ByArgsFields", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		u := &pgqueue.EnqueueOpts{Unique: &pgqueue.UniqueOpts{ByArgs: true, ByArgsFields: []string{"order", "customer"}}}
		a := enqueue(t, c, chargeArgs{Order: 1, Customer: "ada", Note: "first"}, u)
		if b := enqueue(t, c, chargeArgs{Order: 1, Customer: "ada", Note: "double click"}, u); !b.Duplicate || b.ID != a.ID {
			t.Fatal("a field outside ByArgsFields made the job differ")
		}
		if enqueue(t, c, chargeArgs{Order: 1, Customer: "bob"}, u).Duplicate {
			t.Fatal("a named field's difference was ignored")
		}
	})

	t.Run("ByQueue", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		byQueue := func(q string) *pgqueue.EnqueueOpts {
			return &pgqueue.EnqueueOpts{Queue: q, Unique: &pgqueue.UniqueOpts{ByQueue: true}}
		}
		enqueue(t, c, chargeArgs{}, byQueue("a"))
		if enqueue(t, c, chargeArgs{}, byQueue("b")).Duplicate {
			t.Fatal("another queue counted as a duplicate")
		}
		if !enqueue(t, c, chargeArgs{}, byQueue("a")).Duplicate {
			t.Fatal("same queue inserted twice")
		}
		// Without ByQueue the queue does not matter.
		enqueue(t, c, chargeArgs{}, &pgqueue.EnqueueOpts{Queue: "a", Unique: &pgqueue.UniqueOpts{}})
		if !enqueue(t, c, chargeArgs{}, &pgqueue.EnqueueOpts{Queue: "b", Unique: &pgqueue.UniqueOpts{}}).Duplicate {
			t.Fatal("queue counted without ByQueue")
		}
	})

	t.Run("CompletedJobBlocksItsPeriodNotTheNext", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a completed unique job blocking its period, not the next")
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(context.Context, *pgqueue.Job[chargeArgs]) error { return nil }, nil))
		b := startClient(t, pool, ws, nil)
		hourly := func(at time.Time) *pgqueue.EnqueueOpts {
			return &pgqueue.EnqueueOpts{RunAt: at, Unique: &pgqueue.UniqueOpts{ByPeriod: time.Hour}}
		}
		hour := time.Date(2020, 1, 1, 10, 0, 0, 0, time.UTC) // past: due at once
		first := enqueue(t, b.client, chargeArgs{}, hourly(hour.Add(10*time.Minute)))
		waitState(t, pool, first.ID, "completed")
		if res := enqueue(t, b.client, chargeArgs{}, hourly(hour.Add(50*time.Minute))); !res.Duplicate || res.ID != first.ID || res.State != pgqueue.StateCompleted {
			t.Fatalf("same hour: %+v, want the completed job as a duplicate", res)
		}
		if enqueue(t, b.client, chargeArgs{}, hourly(hour.Add(65*time.Minute))).Duplicate {
			t.Fatal("the next hour was blocked")
		}
	})

	t.Run("CancelledAndDiscardedDoNotBlockByDefault", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		u := &pgqueue.EnqueueOpts{Unique: &pgqueue.UniqueOpts{}}
		for _, final := range []string{"cancelled", "discarded"} {
			first := enqueue(t, c, chargeArgs{}, u)
			_, err := pool.Exec(ctx, "UPDATE pgqueue.jobs SET state = $2, finalized_at = now() WHERE id = $1", first.ID, final)
			must(t, err)
			if again := enqueue(t, c, chargeArgs{}, u); again.Duplicate {
				t.Fatalf("a %s job blocked its key", final)
			}
		}
		// Unless ByState names them.
		withCancelled := &pgqueue.EnqueueOpts{Unique: &pgqueue.UniqueOpts{ByQueue: true, ByState: []pgqueue.JobState{
			pgqueue.StateScheduled, pgqueue.StateAvailable, pgqueue.StateRunning, pgqueue.StateCancelled}}}
		first := enqueue(t, c, chargeArgs{}, withCancelled)
		_, err := pool.Exec(ctx, "UPDATE pgqueue.jobs SET state = 'cancelled', finalized_at = now() WHERE id = $1", first.ID)
		must(t, err)
		if !enqueue(t, c, chargeArgs{}, withCancelled).Duplicate {
			t.Fatal("a cancelled job did not block a key whose states name cancelled")
		}
	})

	t.Run("InvalidOptions", func(t *testing.T) {
		t.Parallel()
		c := newClient(t, newPool(t), nil)
		for name, u := range map[string]*pgqueue.UniqueOpts{
			"StatesWithoutRunning": {ByState: []pgqueue.JobState{pgqueue.StateScheduled, pgqueue.StateAvailable}},
			"UnknownState":         {ByState: []pgqueue.JobState{pgqueue.StateScheduled, pgqueue.StateAvailable, pgqueue.StateRunning, "lost"}},
			"NegativePeriod":       {ByPeriod: -time.Hour},
			"SubMicrosecondPeriod": {ByPeriod: time.Nanosecond},
			"FieldsOfNonObject":    {ByArgs: true, ByArgsFields: []string{"x"}},
		} {
			args := pgqueue.JobArgs(chargeArgs{})
			if name == "FieldsOfNonObject" {
				args = listArgs{1, 2}
			}
			if _, err := c.Enqueue(ctx, args, &pgqueue.EnqueueOpts{Unique: u}); !errors.Is(err, pgqueue.ErrInvalid) {
				t.Errorf("%s: got %v, want ErrInvalid", name, err)
			}
		}
	})

	t.Run("InCallersTransaction", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		u := &pgqueue.EnqueueOpts{Unique: &pgqueue.UniqueOpts{}}
		tx, err := pool.Begin(ctx)
		must(t, err)
		first, err := c.EnqueueTx(ctx, tx, chargeArgs{}, u)
		must(t, err)
		second, err := c.EnqueueTx(ctx, tx, chargeArgs{}, u)
		must(t, err)
		if !second.Duplicate || second.ID != first.ID {
			t.Fatal("a duplicate within one transaction was inserted")
		}
		must(t, tx.Rollback(ctx))
		// Rolled back: the key is free again.
		if enqueue(t, c, chargeArgs{}, u).Duplicate {
			t.Fatal("a rolled-back job blocked its key")
		}
	})
}

// rawArgs encodes as its map, for args whose encoding order a test sets.
type rawArgs struct{ m map[string]any }

func (rawArgs) Kind() string                   { return "raw" }
func (r rawArgs) MarshalJSON() ([]byte, error) { return json.Marshal(r.m) }

// listArgs encodes as a JSON array.
type listArgs []int

func (listArgs) Kind() string { return "list" }

// TestUniqueEnqueueMany checks batches: duplicates within the batch and
// against the table are skipped and listed, the rest inserted, in both the
// single-statement and the chunked path.
func TestUniqueEnqueueMany(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "unique batches, single-statement and chunked")
	ctx := context.Background()
	pool := newPool(t)
	c := newClient(t, pool, nil)
	u := &pgqueue.EnqueueOpts{Unique: &pgqueue.UniqueOpts{ByArgs: true}}

	// Of orders 0..6999, every 7th exists already (1,000 jobs); the batch
	// then repeats 1,000 of its own orders twice each.
	var existing []pgqueue.EnqueueManyParams
	for order := 0; order < 7000; order += 7 {
		existing = append(existing, pgqueue.EnqueueManyParams{Args: chargeArgs{Order: order}, Opts: u})
	}
	res, err := c.EnqueueMany(ctx, existing)
	must(t, err)
	if res.Enqueued != 1000 || len(res.Duplicates) != 0 {
		t.Fatalf("seed: %d inserted, %d duplicates", res.Enqueued, len(res.Duplicates))
	}

	var params []pgqueue.EnqueueManyParams
	want := map[int]bool{}
	for order := range 7000 {
		if order%7 == 0 {
			want[len(params)] = true // in the table
		}
		params = append(params, pgqueue.EnqueueManyParams{Args: chargeArgs{Order: order}, Opts: u})
	}
	for k := 0; len(params) < 9000; k++ {
		want[len(params)] = true // repeats an earlier job of the batch, never one of the table
		params = append(params, pgqueue.EnqueueManyParams{Args: chargeArgs{Order: 1 + 7*(k%1000)}, Opts: u})
	}
	for len(params) < 10000 { // not unique: always inserted
		params = append(params, pgqueue.EnqueueManyParams{Args: chargeArgs{Order: 1}})
	}
	res, err = c.EnqueueMany(ctx, params)
	must(t, err)
	if res.Enqueued != 7000 || len(res.Duplicates) != 3000 {
		t.Fatalf("inserted %d with %d duplicates, want 7000 and 3000", res.Enqueued, len(res.Duplicates))
	}
	for _, i := range res.Duplicates {
		if !want[i] {
			t.Fatalf("job %d reported a duplicate; it is not", i)
		}
	}
	if n := countJobs(t, pool, "kind = 'charge'"); n != 1000+7000 {
		t.Fatalf("%d rows, want 8000", n)
	}

	// A small batch (one statement) reports the same way.
	res, err = c.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
		{Args: chargeArgs{Order: 100000}, Opts: u},
		{Args: chargeArgs{Order: 0}, Opts: u}, // in the table
		{Args: chargeArgs{Order: 100000}, Opts: u},
		{Args: chargeArgs{Order: 100001}},
	})
	must(t, err)
	if res.Enqueued != 2 || fmt.Sprint(res.Duplicates) != "[1 2]" {
		t.Fatalf("small batch: %+v, want 2 inserted and duplicates [1 2]", res)
	}
}

// TestUniqueAcrossProcesses enqueues one unique job from 4 processes with
// 16 goroutines each, 1,000 times per goroutine: exactly one row remains.
func TestUniqueAcrossProcesses(t *testing.T) {
	skipInShortMode(t, "4 child processes racing on unique keys")
	t.Parallel()
	pool := newPool(t)
	const procs = 4
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"=unique", childDBEnv+"="+childConnString(t, pool, procs), "PGQUEUE_CHILD_NAME="+strconv.Itoa(p))
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("child %d: %v\n%s", p, err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := countJobs(t, pool, "kind = 'charge'"); n != 1 {
		t.Fatalf("%d rows, want exactly one", n)
	}
}

// uniqueChild is the child process of TestUniqueAcrossProcesses.
func uniqueChild(ctx context.Context, pool *pgxpool.Pool) error {
	c, err := pgqueue.New(pool, nil)
	if err != nil {
		return err
	}
	const goroutines, tries = 16, 1000
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range tries {
				if _, err := c.Enqueue(ctx, chargeArgs{Order: 42}, &pgqueue.EnqueueOpts{Unique: &pgqueue.UniqueOpts{ByArgs: true}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
