package pgqueue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

type badArgs struct {
	C chan int `json:"c"`
}

func (badArgs) Kind() string { return "bad" }

type blobArgs struct {
	Data string `json:"data"`
}

func (blobArgs) Kind() string { return "blob" }

func TestEnqueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ReturnsAvailableRow", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, emailArgs{To: "a@example.com"}, &pgqueue.EnqueueOpts{Priority: 3, Tags: []string{"x"}, Meta: map[string]any{"k": "v"}})
		if err != nil {
			t.Fatal(err)
		}
		if row.ID == 0 || row.State != pgqueue.StateAvailable || row.Queue != pgqueue.QueueDefault || row.Kind != "email" ||
			row.Priority != 3 || row.MaxAttempts != 25 || row.Fence != 0 || row.Attempt != 0 {
			t.Fatalf("unexpected row %+v", row)
		}
		if string(row.EncodedArgs) != `{"to": "a@example.com"}` {
			t.Fatalf("args = %s", row.EncodedArgs)
		}
	})

	t.Run("FutureRunAtIsScheduled", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		row, err := c.Enqueue(ctx, emailArgs{}, &pgqueue.EnqueueOpts{RunAt: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if row.State != pgqueue.StateScheduled {
			t.Fatalf("state = %s, want scheduled", row.State)
		}
	})

	t.Run("TxCommitMakesJobVisible", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "CREATE TABLE orders (id int)"); err != nil {
			t.Fatal(err)
		}
		row, err := c.EnqueueTx(ctx, tx, emailArgs{To: "b"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n := countJobs(t, pool, "id = $1", row.ID); n != 0 {
			t.Fatalf("job visible before commit")
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if n := countJobs(t, pool, "id = $1", row.ID); n != 1 {
			t.Fatalf("job not visible after commit")
		}
	})

	t.Run("TxRollbackLeavesNoJob", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.EnqueueTx(ctx, tx, emailArgs{To: "b"}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.EnqueueManyTx(ctx, tx, []pgqueue.EnqueueManyParams{{Args: emailArgs{}}}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if n := countJobs(t, pool, "true"); n != 0 {
			t.Fatalf("%d jobs after rollback, want 0", n)
		}
	})

	t.Run("ManyIsAllOrNothing", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		_, err := c.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{{Args: emailArgs{}}, {Args: emailArgs{}, Opts: &pgqueue.EnqueueOpts{Queue: "Bad Queue"}}})
		if !errors.Is(err, pgqueue.ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
		if n := countJobs(t, pool, "true"); n != 0 {
			t.Fatalf("%d jobs after a failed batch, want 0", n)
		}
	})
}

func TestEnqueueBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	c := newClient(t, pool, &pgqueue.Config{MaxArgsSize: 1024})

	cancelled, cancel := context.WithCancel(ctx)
	cancel()

	cases := []struct {
		name string
		ctx  context.Context
		args pgqueue.JobArgs
		opts *pgqueue.EnqueueOpts
		want error
	}{
		{"InvalidQueue", ctx, emailArgs{}, &pgqueue.EnqueueOpts{Queue: "no spaces"}, pgqueue.ErrInvalid},
		{"QueueTooLong", ctx, emailArgs{}, &pgqueue.EnqueueOpts{Queue: strings.Repeat("q", 64)}, pgqueue.ErrInvalid},
		{"QueueInjection", ctx, emailArgs{}, &pgqueue.EnqueueOpts{Queue: "a'; DROP TABLE pgqueue.jobs; --"}, pgqueue.ErrInvalid},
		{"ArgsDoNotMarshal", ctx, badArgs{C: make(chan int)}, nil, pgqueue.ErrInvalid},
		{"ArgsTooLarge", ctx, blobArgs{Data: strings.Repeat("x", 2048)}, nil, pgqueue.ErrTooLarge},
		{"NilArgs", ctx, nil, nil, pgqueue.ErrInvalid},
		{"EmptyKind", ctx, emptyKindArgs{}, nil, pgqueue.ErrInvalid},
		{"NegativeMaxAttempts", ctx, emailArgs{}, &pgqueue.EnqueueOpts{MaxAttempts: -1}, pgqueue.ErrInvalid},
		{"CancelledContext", cancelled, emailArgs{}, nil, context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.Enqueue(tc.ctx, tc.args, tc.opts); !errors.Is(err, tc.want) {
				t.Fatalf("Enqueue: err = %v, want %v", err, tc.want)
			}
			if _, err := c.EnqueueMany(tc.ctx, []pgqueue.EnqueueManyParams{{Args: tc.args, Opts: tc.opts}}); !errors.Is(err, tc.want) {
				t.Fatalf("EnqueueMany: err = %v, want %v", err, tc.want)
			}
		})
	}
	if n := countJobs(t, pool, "true"); n != 0 {
		t.Fatalf("%d jobs written by bad input, want 0", n)
	}

	t.Run("ClosedPool", func(t *testing.T) {
		closed := newPool(t)
		cc := newClient(t, closed, nil)
		closed.Close()
		if _, err := cc.Enqueue(ctx, emailArgs{}, nil); !errors.Is(err, pgqueue.ErrClosedPool) {
			t.Fatalf("Enqueue: err = %v, want ErrClosedPool", err)
		}
		if _, err := cc.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{{Args: emailArgs{}}}); !errors.Is(err, pgqueue.ErrClosedPool) {
			t.Fatalf("EnqueueMany: err = %v, want ErrClosedPool", err)
		}
	})
}

// A batch below CopyThreshold is one INSERT: every option must land as
// asked.
func TestEnqueueManySmallBatch(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "every option of a batch below CopyThreshold (one INSERT)")
	ctx := context.Background()
	pool := newPool(t)
	c := newClient(t, pool, nil)
	var past time.Time
	must(t, pool.QueryRow(ctx, "SELECT now() - interval '1 minute'").Scan(&past))
	res, err := c.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
		{Args: noteArgs{N: 1}, Opts: &pgqueue.EnqueueOpts{Queue: "a", Priority: 2, Tags: []string{"x", "y"}, Meta: map[string]any{"k": 1}, MaxAttempts: 3}},
		{Args: noteArgs{N: 2}, Opts: &pgqueue.EnqueueOpts{RunAt: time.Now().Add(time.Hour)}},
		{Args: noteArgs{N: 3}, Opts: &pgqueue.EnqueueOpts{RunAt: past, SingletonKey: "k"}},
	})
	must(t, err)
	if res.Enqueued != 3 || len(res.Duplicates) != 0 {
		t.Fatalf("inserted %+v", res)
	}
	if countJobs(t, pool, "queue = 'a' AND priority = 2 AND tags = '{x,y}' AND meta = '{\"k\": 1}' AND max_attempts = 3 AND state = 'available'") != 1 ||
		countJobs(t, pool, "args->>'n' = '2' AND state = 'scheduled'") != 1 ||
		countJobs(t, pool, "args->>'n' = '3' AND state = 'available' AND singleton_key = 'k'") != 1 {
		t.Fatal("small batch rows differ from what was asked")
	}
}
