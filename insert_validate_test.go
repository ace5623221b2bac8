package pgqueue_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// anyKindArgs is args whose kind is data, so tests can feed any kind.
type anyKindArgs struct {
	K string `json:"-"`
	S string `json:"s"`
}

func (a anyKindArgs) Kind() string { return a.K }

// storedJob is what a path wrote, as the database has it.
type storedJob struct {
	kind, s, singleton  string
	partition, sequence string
	tags                []string
	runAt               time.Time
}

// pathResult is one insert path's outcome: the stored job or the error.
type pathResult struct {
	path string
	job  storedJob
	err  error
}

// enqueuePaths inserts one job through each insert path: Enqueue, a small
// EnqueueMany (one INSERT) and a COPY-sized EnqueueMany, whose last job
// is the one read back.
func enqueuePaths(t testing.TB, c *pgqueue.Client, pool *pgxpool.Pool, args pgqueue.JobArgs, opts *pgqueue.EnqueueOpts) []pathResult {
	t.Helper()
	ctx := context.Background()
	many := func(n int) error {
		params := make([]pgqueue.EnqueueManyParams, n)
		for i := range params {
			params[i] = pgqueue.EnqueueManyParams{Args: args, Opts: opts}
		}
		_, err := c.EnqueueMany(ctx, params)
		return err
	}
	var results []pathResult
	run := func(path string, insert func() error) {
		r := pathResult{path: path, err: insert()}
		if r.err == nil {
			r.job = lastJob(t, pool) // before the next path writes
		}
		results = append(results, r)
	}
	run("Enqueue", func() error { _, err := c.Enqueue(ctx, args, opts); return err })
	run("EnqueueMany(1)", func() error { return many(1) })
	run("EnqueueMany(COPY)", func() error { return many(pgqueue.CopyThreshold) })
	return results
}

const storedJobSQL = `SELECT kind, args->>'s', coalesce(singleton_key, ''), coalesce(partition_key, ''), coalesce(sequence_key, ''),
	tags, run_at FROM pgqueue.jobs `

func scanStored(t testing.TB, row pgx.Row) storedJob {
	t.Helper()
	var j storedJob
	if err := row.Scan(&j.kind, &j.s, &j.singleton, &j.partition, &j.sequence, &j.tags, &j.runAt); err != nil {
		t.Fatal(err)
	}
	return j
}

func lastJob(t testing.TB, pool *pgxpool.Pool) storedJob {
	t.Helper()
	return scanStored(t, pool.QueryRow(context.Background(), storedJobSQL+`ORDER BY id DESC LIMIT 1`))
}

// typedInsertErrors are the errors bad input may give.
var typedInsertErrors = []error{pgqueue.ErrInvalid, pgqueue.ErrInvalid, pgqueue.ErrInvalid, pgqueue.ErrTooLarge}

func sentinel(err error) error {
	for _, s := range typedInsertErrors {
		if errors.Is(err, s) {
			return s
		}
	}
	return nil
}

// checkSamePaths fails unless every path refused with the same typed error
// or stored exactly args and opts (run_at to the microsecond, rounded down).
func checkSamePaths(t testing.TB, results []pathResult, args anyKindArgs, opts *pgqueue.EnqueueOpts) {
	t.Helper()
	for _, r := range results {
		if r.err != nil {
			if sentinel(r.err) == nil {
				t.Fatalf("%s: untyped error %v", r.path, r.err)
			}
			if sentinel(r.err) != sentinel(results[0].err) {
				t.Fatalf("%s: %v; %s: %v", r.path, r.err, results[0].path, results[0].err)
			}
			continue
		}
		if results[0].err != nil {
			t.Fatalf("%s stored the job; %s: %v", r.path, results[0].path, results[0].err)
		}
		j := r.job
		wantTags := opts.Tags
		if wantTags == nil {
			wantTags = []string{}
		}
		if j.kind != args.K || j.s != args.S || j.singleton != opts.SingletonKey || !slices.Equal(j.tags, wantTags) {
			t.Fatalf("%s stored kind %q s %q singleton %q tags %q; want %q %q %q %q", r.path, j.kind, j.s, j.singleton, j.tags, args.K, args.S, opts.SingletonKey, wantTags)
		}
		if j.partition != opts.PartitionKey || j.sequence != opts.SequenceKey {
			t.Fatalf("%s stored partition key %q sequence key %q; want %q %q", r.path, j.partition, j.sequence, opts.PartitionKey, opts.SequenceKey)
		}
		if !opts.RunAt.IsZero() {
			want := opts.RunAt.Truncate(0).UTC()
			want = want.Add(-time.Duration(want.Nanosecond() % 1000)) // rounded down to µs
			if !j.runAt.Equal(want) {
				t.Fatalf("%s stored run_at %s, want %s", r.path, j.runAt.UTC(), want)
			}
		}
	}
}

// Far dates: every path stores years 1 to 9999 exactly (COPY clamped them
// through a time.Duration overflow) and refuses the rest with
// ErrInvalid.
func TestRunAtFarDatesSameOnEveryPath(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	c := newClient(t, pool, nil)
	for _, runAt := range []time.Time{
		time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC),
		time.Date(1500, 6, 7, 8, 9, 10, 123456789, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 999999500, time.UTC), // rounds down, not towards 2000
		time.Date(2500, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600)),
		time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
	} {
		args := anyKindArgs{K: "far", S: runAt.String()}
		opts := &pgqueue.EnqueueOpts{RunAt: runAt}
		res := enqueuePaths(t, c, pool, args, opts)
		for _, r := range res {
			if r.err != nil {
				t.Fatalf("%s %s: %v", r.path, runAt, r.err)
			}
		}
		checkSamePaths(t, res, args, opts)
	}
	for _, runAt := range []time.Time{
		time.Date(0, 12, 31, 23, 0, 0, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 30, 0, 0, time.FixedZone("west", -3600)), // year 10000 in UTC
		time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		for _, r := range enqueuePaths(t, c, pool, anyKindArgs{K: "far"}, &pgqueue.EnqueueOpts{RunAt: runAt}) {
			if !errors.Is(r.err, pgqueue.ErrInvalid) {
				t.Fatalf("%s %s: %v, want ErrInvalid", r.path, runAt, r.err)
			}
		}
	}
}

// Text the server would refuse or encoding/json would alter is refused by
// every path with a typed error; the valid look-alikes are stored as they
// are.
func TestBadTextRefusedOnEveryPath(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	c := newClient(t, pool, nil)
	for _, tc := range []struct {
		name string
		args anyKindArgs
		opts pgqueue.EnqueueOpts
		want error
	}{
		{"args invalid UTF-8", anyKindArgs{K: "k", S: "a\xffb"}, pgqueue.EnqueueOpts{}, pgqueue.ErrInvalid},
		{"args NUL", anyKindArgs{K: "k", S: "a\x00b"}, pgqueue.EnqueueOpts{}, pgqueue.ErrInvalid},
		{"kind NUL", anyKindArgs{K: "k\x00"}, pgqueue.EnqueueOpts{}, pgqueue.ErrInvalid},
		{"kind invalid UTF-8", anyKindArgs{K: "k\xc3"}, pgqueue.EnqueueOpts{}, pgqueue.ErrInvalid},
		{"tag NUL", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{Tags: []string{"ok", "t\x00"}}, pgqueue.ErrInvalid},
		{"tag invalid UTF-8", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{Tags: []string{"\xfe"}}, pgqueue.ErrInvalid},
		{"singleton key NUL", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{SingletonKey: "s\x00"}, pgqueue.ErrInvalid},
		{"singleton key invalid UTF-8", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{SingletonKey: "s\xff"}, pgqueue.ErrInvalid},
		{"meta NUL", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{Meta: map[string]any{"m": "\x00"}}, pgqueue.ErrInvalid},
		{"partition key NUL", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{PartitionKey: "p\x00"}, pgqueue.ErrInvalid},
		{"partition key invalid UTF-8", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{PartitionKey: "p\xff"}, pgqueue.ErrInvalid},
		{"partition key 256 bytes", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{PartitionKey: strings.Repeat("p", 256)}, pgqueue.ErrInvalid},
		{"sequence key NUL", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{SequenceKey: "\x00"}, pgqueue.ErrInvalid},
		{"sequence key invalid UTF-8", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{SequenceKey: "s\xc3"}, pgqueue.ErrInvalid},
		{"sequence key 128 characters, 256 bytes", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{SequenceKey: strings.Repeat("é", 128)}, pgqueue.ErrInvalid},
		{"keys of 255 bytes", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{PartitionKey: strings.Repeat("p", 255), SequenceKey: strings.Repeat("é", 127) + "s"}, nil},
		{"genuine U+FFFD", anyKindArgs{K: "k\ufffd", S: "\ufffd"}, pgqueue.EnqueueOpts{Tags: []string{"\ufffd"}, SingletonKey: "\ufffd",
			PartitionKey: "\ufffd", SequenceKey: "\ufffd"}, nil},
		{"escaped look-alikes", anyKindArgs{K: "k", S: `\ufffd \u0000 \\`}, pgqueue.EnqueueOpts{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := enqueuePaths(t, c, pool, tc.args, &tc.opts)
			for _, r := range res {
				if !errors.Is(r.err, tc.want) || (tc.want == nil) != (r.err == nil) {
					t.Fatalf("%s: %v, want %v", r.path, r.err, tc.want)
				}
			}
			checkSamePaths(t, res, tc.args, &tc.opts)
		})
	}
}

// nilPtrArgs has a value-receiver Kind: called on a typed nil pointer, it
// panics.
type nilPtrArgs struct{ N int }

func (nilPtrArgs) Kind() string { return "nil_ptr" }

// Input that used to panic is an error: a typed nil pointer as args, a nil
// worker func, a nil transaction.
func TestNilInputsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	c := newClient(t, pool, nil)
	var args *nilPtrArgs
	if _, err := c.Enqueue(ctx, args, nil); !errors.Is(err, pgqueue.ErrInvalid) {
		t.Fatalf("Enqueue typed nil: %v", err)
	}
	params := make([]pgqueue.EnqueueManyParams, pgqueue.CopyThreshold)
	for i := range params {
		params[i] = pgqueue.EnqueueManyParams{Args: nilPtrArgs{}}
	}
	params[7].Args = args
	if _, err := c.EnqueueMany(ctx, params); !errors.Is(err, pgqueue.ErrInvalid) {
		t.Fatalf("EnqueueMany typed nil: %v", err)
	}
	if _, err := c.EnqueueMany(ctx, params[:2]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnqueueMany(ctx, params[6:8]); !errors.Is(err, pgqueue.ErrInvalid) {
		t.Fatalf("small EnqueueMany typed nil: %v", err)
	}
	ws := pgqueue.NewWorkers()
	if err := pgqueue.AddWorkerFunc[nilPtrArgs](ws, nil, nil); !errors.Is(err, pgqueue.ErrInvalid) {
		t.Fatalf("AddWorkerFunc nil: %v", err)
	}
	if err := pgqueue.AddWorker[nilPtrArgs](ws, nil, nil); !errors.Is(err, pgqueue.ErrInvalid) {
		t.Fatalf("AddWorker nil: %v", err)
	}
	res, err := c.Enqueue(ctx, nilPtrArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CompleteTx(ctx, nil, res.JobRow); !errors.Is(err, pgqueue.ErrInvalid) {
		t.Fatalf("CompleteTx nil tx: %v", err)
	}
	var ptx *pgxpool.Tx
	if err := c.CompleteTx(ctx, ptx, res.JobRow); !errors.Is(err, pgqueue.ErrInvalid) {
		t.Fatalf("CompleteTx typed nil tx: %v", err)
	}
	if err := c.CheckFenceTx(ctx, nil, "r", 1); !errors.Is(err, pgqueue.ErrInvalid) {
		t.Fatalf("CheckFenceTx nil tx: %v", err)
	}
}

// FuzzEnqueuePaths feeds the same job to every insert path and requires
// the same outcome: the same typed error, or the input stored unaltered.
// Run it with: go test -run '^$' -fuzz FuzzEnqueuePaths -fuzztime 3m .
// Its corpus is kept in testdata/fuzz/FuzzEnqueuePaths.
func FuzzEnqueuePaths(f *testing.F) {
	f.Add("hello", "kind", "tag", "", int64(0), int64(0))
	f.Add("a\xffb", "k", "t", "key", int64(1), int64(5))
	f.Add("nul\x00", "k\x00", "t\x00", "key\x00", int64(-62135596700), int64(999))
	f.Add(`\ufffd`, "k\ufffd", "", "", int64(253402300799), int64(999999999))
	f.Add("x", strings.Repeat("k", 256), "", "", int64(9e12), int64(0))
	pool := newPool(f)
	c := newClient(f, pool, nil)
	f.Fuzz(func(t *testing.T, s, kind, tag, key string, sec, nsec int64) {
		args := anyKindArgs{K: kind, S: s}
		opts := &pgqueue.EnqueueOpts{SingletonKey: key}
		if tag != "" {
			opts.Tags = []string{tag}
		}
		if sec != 0 {
			opts.RunAt = time.Unix(sec, nsec)
		}
		checkSamePaths(t, enqueuePaths(t, c, pool, args, opts), args, opts)
	})
}
