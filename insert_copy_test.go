package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// A batch of 100,000 jobs over three queues, one in ten scheduled, goes
// through COPY whole.
func TestEnqueueManyCopies100000(t *testing.T) {
	skipInShortMode(t, "a 100,000-job COPY")
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	c := newClient(t, pool, nil)
	const n = 100_000
	params := make([]pgqueue.EnqueueManyParams, n)
	for i := range params {
		opts := &pgqueue.EnqueueOpts{Queue: fmt.Sprintf("q%d", i%3), Priority: int16(i % 5)}
		if i%10 == 0 {
			opts.RunAt = time.Now().Add(time.Hour)
		}
		params[i] = pgqueue.EnqueueManyParams{Args: emailArgs{To: fmt.Sprint(i)}, Opts: opts}
	}
	res, err := c.EnqueueMany(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Enqueued; got != n {
		t.Fatalf("inserted %d, want %d", got, n)
	}
	if a := countJobs(t, pool, "state = 'available'"); a != n*9/10 {
		t.Fatalf("%d available, want %d", a, n*9/10)
	}
	if s := countJobs(t, pool, "state = 'scheduled'"); s != n/10 {
		t.Fatalf("%d scheduled, want %d", s, n/10)
	}
	if q := countJobs(t, pool, "queue = 'q1' AND args->>'to' = '1'"); q != 1 {
		t.Fatalf("job 1 not found with its args")
	}
}

// COPY writes every column in binary: each must read back as Enqueue
// would have written it.
func TestEnqueueManyCopyColumns(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "every column COPY writes, read back as Enqueue writes it")
	ctx := context.Background()
	pool := newPool(t)
	c := newClient(t, pool, nil)
	runAt := time.Date(2031, 2, 3, 4, 5, 6, 789012000, time.UTC)
	params := make([]pgqueue.EnqueueManyParams, pgqueue.CopyThreshold)
	for i := range params {
		params[i] = pgqueue.EnqueueManyParams{Args: emailArgs{To: "plain"}}
	}
	params[1] = pgqueue.EnqueueManyParams{Args: emailArgs{To: "ünïcode ✓"}, Opts: &pgqueue.EnqueueOpts{
		Queue: "mail", Priority: -3, MaxAttempts: 7, Tags: []string{"a", "", "ç d"},
		Meta: map[string]any{"k": 1}, SingletonKey: "key-1",
	}}
	params[2] = pgqueue.EnqueueManyParams{Args: emailArgs{To: "later"}, Opts: &pgqueue.EnqueueOpts{RunAt: runAt, Tags: []string{"x"}}}
	res, err := c.EnqueueMany(ctx, params)
	if err != nil || res.Enqueued != int64(len(params)) {
		t.Fatalf("EnqueueMany = %+v, %v", res, err)
	}

	var (
		queue, kind, state, to, singleton string
		priority                          int16
		maxAttempts                       int
		tags                              []string
		meta                              map[string]any
		at                                time.Time
	)
	err = pool.QueryRow(ctx, `SELECT queue, kind, state, args->>'to', priority, max_attempts, tags, meta, singleton_key
		FROM pgqueue.jobs WHERE args->>'to' <> 'plain' AND args->>'to' <> 'later'`).
		Scan(&queue, &kind, &state, &to, &priority, &maxAttempts, &tags, &meta, &singleton)
	if err != nil {
		t.Fatal(err)
	}
	if queue != "mail" || kind != (emailArgs{}).Kind() || state != "available" || to != "ünïcode ✓" || priority != -3 ||
		maxAttempts != 7 || strings.Join(tags, "|") != "a||ç d" || meta["k"] != float64(1) || singleton != "key-1" {
		t.Fatalf("row = %q %q %q %q %d %d %q %v %q", queue, kind, state, to, priority, maxAttempts, tags, meta, singleton)
	}
	err = pool.QueryRow(ctx, `SELECT state, run_at, tags FROM pgqueue.jobs WHERE args->>'to' = 'later'`).Scan(&state, &at, &tags)
	if err != nil {
		t.Fatal(err)
	}
	if state != "scheduled" || !at.Equal(runAt) || len(tags) != 1 || tags[0] != "x" {
		t.Fatalf("scheduled row = %q %s %q, want scheduled %s [x]", state, at, tags, runAt)
	}
	if got := countJobs(t, pool, "args->>'to' = 'plain' AND queue = 'default' AND state = 'available' AND tags = '{}' AND meta = '{}' AND singleton_key IS NULL AND max_attempts = 25"); got != len(params)-2 {
		t.Fatalf("%d plain rows with defaults, want %d", got, len(params)-2)
	}
}

// A job found invalid while the COPY streams fails the call with its typed
// error and leaves the caller's transaction usable, with none of the
// batch's rows in it.
func TestEnqueueManyTxInvalidJobMidStream(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "an invalid job mid-COPY leaving the caller's transaction usable")
	ctx := context.Background()
	pool := newPool(t)
	c := newClient(t, pool, &pgqueue.Config{MaxArgsSize: 1024})
	if _, err := pool.Exec(ctx, "CREATE TABLE orders (id int)"); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name string
		job  pgqueue.EnqueueManyParams
		want error
	}{
		{"queue", pgqueue.EnqueueManyParams{Args: emailArgs{}, Opts: &pgqueue.EnqueueOpts{Queue: "Bad Queue"}}, pgqueue.ErrInvalid},
		{"size", pgqueue.EnqueueManyParams{Args: emailArgs{To: strings.Repeat("x", 2000)}}, pgqueue.ErrTooLarge},
		{"scheduled", pgqueue.EnqueueManyParams{Args: nil, Opts: &pgqueue.EnqueueOpts{RunAt: time.Now().Add(time.Hour)}}, pgqueue.ErrInvalid},
	}
	for _, b := range bad {
		params := make([]pgqueue.EnqueueManyParams, 50_000)
		for i := range params {
			params[i] = pgqueue.EnqueueManyParams{Args: emailArgs{To: "ok"}}
		}
		params[40_000] = b.job
		_, err := c.EnqueueManyTx(ctx, tx, params)
		if !errors.Is(err, b.want) || !strings.Contains(err.Error(), "job 40000") {
			t.Fatalf("%s: err = %v, want %v naming job 40000", b.name, err, b.want)
		}
	}
	if _, err := c.EnqueueManyTx(ctx, tx, make100(pgqueue.EnqueueManyParams{Args: emailArgs{To: "kept"}})); err != nil {
		t.Fatalf("enqueue after a failed batch: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit after a failed batch: %v", err)
	}
	if n := countJobs(t, pool, "true"); n != 100 {
		t.Fatalf("%d jobs, want the 100 of the good batch", n)
	}
	var orders int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&orders); err != nil || orders != 1 {
		t.Fatalf("orders = %d, %v; want the caller's row", orders, err)
	}
}

func make100(p pgqueue.EnqueueManyParams) []pgqueue.EnqueueManyParams {
	out := make([]pgqueue.EnqueueManyParams, 100)
	for i := range out {
		out[i] = p
	}
	return out
}

// A server-side failure mid-COPY (args whose JSON holds a lone surrogate
// escape, which jsonb refuses; invalid UTF-8 is refused before the server
// now) is a database error, and the caller's transaction survives it too.
func TestEnqueueManyTxServerRejectsRow(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "a row the server refuses mid-COPY leaving the caller's transaction usable")
	ctx := context.Background()
	pool := newPool(t)
	c := newClient(t, pool, nil)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	params := make100(pgqueue.EnqueueManyParams{Args: emailArgs{To: "ok"}})
	params[70] = pgqueue.EnqueueManyParams{Args: loneSurrogateArgs{}}
	if _, err := c.EnqueueManyTx(ctx, tx, params); err == nil || !strings.Contains(err.Error(), "copy") {
		t.Fatalf("err = %v, want the server's COPY error", err)
	}
	if _, err := c.EnqueueManyTx(ctx, tx, make100(pgqueue.EnqueueManyParams{Args: emailArgs{To: "kept"}})); err != nil {
		t.Fatalf("enqueue after a failed batch: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countJobs(t, pool, "true"); n != 100 {
		t.Fatalf("%d jobs, want 100", n)
	}
}

// loneSurrogateArgs encodes to JSON that only the server refuses.
type loneSurrogateArgs struct{}

func (loneSurrogateArgs) Kind() string { return "lone_surrogate" }

func (loneSurrogateArgs) MarshalJSON() ([]byte, error) { return []byte(`{"s":"\ud800"}`), nil }
