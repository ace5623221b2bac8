package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/jobsql"
)

// keyDefaultsArgs declares flow keys as its kind's defaults.
type keyDefaultsArgs struct {
	N int `json:"n"`
}

func (keyDefaultsArgs) Kind() string { return "key_defaults" }

func (keyDefaultsArgs) EnqueueOpts() pgqueue.EnqueueOpts {
	return pgqueue.EnqueueOpts{PartitionKey: "default-partition", SequenceKey: "default-sequence"}
}

// The keys of the tests: multi-byte, and the longest allowed.
var (
	insertPartitionKey = "tenant ü/7"
	insertSequenceKey  = "order-42 𝄞"
	insertLongKey      = strings.Repeat("é", 127) + "k" // 255 bytes
	insertRunAt        = time.Date(2040, 1, 2, 3, 4, 5, 0, time.UTC)
)

// checkKeys fails unless row and the job as JobGet reads it carry the
// keys.
func checkKeys(t *testing.T, c *pgqueue.Client, what string, row *pgqueue.JobRow, partition, sequence string) {
	t.Helper()
	if row.PartitionKey != partition || row.SequenceKey != sequence {
		t.Errorf("%s: returned row has keys %q, %q; want %q, %q", what, row.PartitionKey, row.SequenceKey, partition, sequence)
	}
	got, err := c.JobGet(context.Background(), row.ID)
	must(t, err)
	if got.PartitionKey != partition || got.SequenceKey != sequence {
		t.Errorf("%s: JobGet reads keys %q, %q; want %q, %q", what, got.PartitionKey, got.SequenceKey, partition, sequence)
	}
}

// jobByN is the job of kind whose args n is n, as JobGet reads it.
func jobByN(t *testing.T, c *pgqueue.Client, pool *pgxpool.Pool, kind string, n int) *pgqueue.JobRow {
	t.Helper()
	var id int64
	must(t, pool.QueryRow(context.Background(), `SELECT id FROM pgqueue.jobs WHERE kind = $1 AND (args->>'n')::int = $2`, kind, n).Scan(&id))
	row, err := c.JobGet(context.Background(), id)
	must(t, err)
	return row
}

// flowManyParams are n note jobs: every third with both keys, every third
// with a partition key alone, the rest with none; odd ones scheduled (the
// other COPY stream).
func flowManyParams(n int, later bool) []pgqueue.EnqueueManyParams {
	params := make([]pgqueue.EnqueueManyParams, n)
	for i := range params {
		o := &pgqueue.EnqueueOpts{}
		switch i % 3 {
		case 0:
			o.PartitionKey, o.SequenceKey = insertPartitionKey, fmt.Sprint("seq-", i)
		case 1:
			o.PartitionKey = insertLongKey
		}
		if later && i%2 == 1 {
			o.RunAt = insertRunAt
		}
		params[i] = pgqueue.EnqueueManyParams{Args: noteArgs{N: i}, Opts: o}
	}
	return params
}

// checkManyKeys fails unless the n jobs of flowManyParams read back with
// their keys.
func checkManyKeys(t *testing.T, c *pgqueue.Client, pool *pgxpool.Pool, n int) {
	t.Helper()
	for i := range n {
		row := jobByN(t, c, pool, "note", i)
		var wantP, wantS string
		switch i % 3 {
		case 0:
			wantP, wantS = insertPartitionKey, fmt.Sprint("seq-", i)
		case 1:
			wantP = insertLongKey
		}
		if row.PartitionKey != wantP || row.SequenceKey != wantS {
			t.Fatalf("job %d: keys %q, %q; want %q, %q", i, row.PartitionKey, row.SequenceKey, wantP, wantS)
		}
	}
	// No key is stored as an empty string.
	if n := countJobs(t, pool, "partition_key = '' OR sequence_key = ''"); n != 0 {
		t.Fatalf("%d jobs with an empty key, want NULLs", n)
	}
}

// TestInsertFlowKeysOnEveryPath checks that every insert path stores
// EnqueueOpts.PartitionKey and SequenceKey, NULL when empty, and that
// every read of a job returns them.
func TestInsertFlowKeysOnEveryPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts := &pgqueue.EnqueueOpts{PartitionKey: insertPartitionKey, SequenceKey: insertSequenceKey}

	t.Run("EnqueueAndEnqueueTx", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		res, err := c.Enqueue(ctx, noteArgs{N: 1}, opts)
		must(t, err)
		checkKeys(t, c, "Enqueue", res.JobRow, insertPartitionKey, insertSequenceKey)
		res, err = c.Enqueue(ctx, noteArgs{N: 2}, &pgqueue.EnqueueOpts{PartitionKey: insertLongKey, RunAt: insertRunAt})
		must(t, err)
		checkKeys(t, c, "Enqueue scheduled, partition key alone", res.JobRow, insertLongKey, "")
		res, err = c.Enqueue(ctx, noteArgs{N: 3}, nil)
		must(t, err)
		checkKeys(t, c, "Enqueue without keys", res.JobRow, "", "")

		tx, err := pool.Begin(ctx)
		must(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		res, err = c.EnqueueTx(ctx, tx, noteArgs{N: 4}, &pgqueue.EnqueueOpts{SequenceKey: insertLongKey})
		must(t, err)
		must(t, tx.Commit(ctx))
		checkKeys(t, c, "EnqueueTx, sequence key alone", res.JobRow, "", insertLongKey)
		if n := countJobs(t, pool, "partition_key IS NULL AND sequence_key IS NULL"); n != 1 {
			t.Fatalf("%d jobs without keys, want 1 (NULL, not '')", n)
		}
	})

	t.Run("EnqueueManyStatement", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		params := flowManyParams(pgqueue.CopyThreshold-1, true)
		res, err := c.EnqueueMany(ctx, params)
		must(t, err)
		if res.Enqueued != int64(len(params)) {
			t.Fatalf("enqueued %d", res.Enqueued)
		}
		checkManyKeys(t, c, pool, len(params))
	})

	t.Run("EnqueueManyCopy", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		params := flowManyParams(2*pgqueue.CopyThreshold, true)
		tx, err := pool.Begin(ctx)
		must(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		res, err := c.EnqueueManyTx(ctx, tx, params)
		must(t, err)
		must(t, tx.Commit(ctx))
		if res.Enqueued != int64(len(params)) {
			t.Fatalf("enqueued %d", res.Enqueued)
		}
		if n := countJobs(t, pool, "state = 'scheduled'"); n != pgqueue.CopyThreshold {
			t.Fatalf("%d scheduled jobs, want %d: both COPY streams", n, pgqueue.CopyThreshold)
		}
		checkManyKeys(t, c, pool, len(params))
	})

	t.Run("Unique", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		unique := &pgqueue.EnqueueOpts{PartitionKey: insertPartitionKey, SequenceKey: insertSequenceKey, Unique: &pgqueue.UniqueOpts{ByKey: "u"}}
		res, err := c.Enqueue(ctx, noteArgs{N: 1}, unique)
		must(t, err)
		checkKeys(t, c, "unique Enqueue", res.JobRow, insertPartitionKey, insertSequenceKey)
		// The duplicate's row is the existing job's, with its keys.
		dup, err := c.Enqueue(ctx, noteArgs{N: 2}, &pgqueue.EnqueueOpts{PartitionKey: "other", Unique: &pgqueue.UniqueOpts{ByKey: "u"}})
		must(t, err)
		if !dup.Duplicate || dup.ID != res.ID {
			t.Fatalf("not a duplicate of job %d: %+v", res.ID, dup)
		}
		checkKeys(t, c, "duplicate", dup.JobRow, insertPartitionKey, insertSequenceKey)

		// A batch with unique jobs: its own statement.
		params := flowManyParams(10, true)
		params[4].Opts.Unique = &pgqueue.UniqueOpts{ByKey: "u4"}
		params[5].Opts.Unique = &pgqueue.UniqueOpts{ByKey: "u"} // a duplicate of the first job
		params[5].Args = noteArgs{N: 1000}
		many, err := c.EnqueueMany(ctx, params)
		must(t, err)
		if many.Enqueued != 9 || len(many.Duplicates) != 1 || many.Duplicates[0] != 5 {
			t.Fatalf("result %+v", many)
		}
		for i, p := range params {
			if i == 1 || i == 5 {
				continue // job 1's n is the unique Enqueue's; job 5 was not inserted
			}
			row := jobByN(t, c, pool, "note", p.Args.(noteArgs).N)
			if row.PartitionKey != p.Opts.PartitionKey || row.SequenceKey != p.Opts.SequenceKey {
				t.Fatalf("job %d: keys %q, %q; want %q, %q", i, row.PartitionKey, row.SequenceKey, p.Opts.PartitionKey, p.Opts.SequenceKey)
			}
		}
	})

	t.Run("ArgsDefaults", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		res, err := c.Enqueue(ctx, keyDefaultsArgs{N: 1}, nil)
		must(t, err)
		checkKeys(t, c, "defaults", res.JobRow, "default-partition", "default-sequence")
		res, err = c.Enqueue(ctx, keyDefaultsArgs{N: 2}, &pgqueue.EnqueueOpts{PartitionKey: insertPartitionKey})
		must(t, err)
		checkKeys(t, c, "the caller's partition key", res.JobRow, insertPartitionKey, "default-sequence")
		res, err = c.Enqueue(ctx, keyDefaultsArgs{N: 3}, &pgqueue.EnqueueOpts{SequenceKey: insertSequenceKey})
		must(t, err)
		checkKeys(t, c, "the caller's sequence key", res.JobRow, "default-partition", insertSequenceKey)

		params := make([]pgqueue.EnqueueManyParams, pgqueue.CopyThreshold)
		for i := range params {
			params[i] = pgqueue.EnqueueManyParams{Args: keyDefaultsArgs{N: 10 + i}}
		}
		params[0].Opts = &pgqueue.EnqueueOpts{SequenceKey: insertSequenceKey}
		_, err = c.EnqueueMany(ctx, params)
		must(t, err)
		if row := jobByN(t, c, pool, "key_defaults", 10); row.PartitionKey != "default-partition" || row.SequenceKey != insertSequenceKey {
			t.Fatalf("COPY with the caller's sequence key: %q, %q", row.PartitionKey, row.SequenceKey)
		}
		if n := countJobs(t, pool, "kind = 'key_defaults' AND partition_key = 'default-partition' AND sequence_key = 'default-sequence'"); n != 1+len(params)-1 {
			t.Fatalf("%d jobs with both default keys, want %d", n, len(params))
		}
	})

	t.Run("EnqueueMiddleware", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		// The middleware sees the caller's keys and may change them.
		var seen []string
		mw := pgqueue.EnqueueMiddlewareFunc(func(ctx context.Context, jobs []*pgqueue.EnqueueParams, next func(context.Context) (*pgqueue.EnqueuedJobs, error)) error {
			for _, j := range jobs {
				seen = append(seen, j.PartitionKey+"|"+j.SequenceKey)
				if j.PartitionKey == "" {
					j.PartitionKey = "from-middleware"
				}
			}
			_, err := next(ctx)
			return err
		})
		c := newClient(t, pool, &pgqueue.Config{EnqueueMiddleware: []pgqueue.EnqueueMiddleware{mw}})
		res, err := c.Enqueue(ctx, noteArgs{N: 1}, opts)
		must(t, err)
		checkKeys(t, c, "Enqueue through middleware", res.JobRow, insertPartitionKey, insertSequenceKey)
		res, err = c.Enqueue(ctx, noteArgs{N: 2}, &pgqueue.EnqueueOpts{SequenceKey: insertSequenceKey})
		must(t, err)
		checkKeys(t, c, "a key the middleware set", res.JobRow, "from-middleware", insertSequenceKey)
		if len(seen) != 2 || seen[0] != insertPartitionKey+"|"+insertSequenceKey || seen[1] != "|"+insertSequenceKey {
			t.Fatalf("middleware saw %q", seen)
		}
		params := flowManyParams(pgqueue.CopyThreshold, true)
		for i := range params {
			params[i].Args = noteArgs{N: 100 + i}
		}
		_, err = c.EnqueueMany(ctx, params)
		must(t, err)
		if row := jobByN(t, c, pool, "note", 100); row.PartitionKey != insertPartitionKey || row.SequenceKey != "seq-0" {
			t.Fatalf("COPY through middleware, job 0: %q, %q", row.PartitionKey, row.SequenceKey)
		}
		if row := jobByN(t, c, pool, "note", 102); row.PartitionKey != "from-middleware" || row.SequenceKey != "" {
			t.Fatalf("COPY through middleware, job 2: %q, %q", row.PartitionKey, row.SequenceKey)
		}
	})

	t.Run("ReadBack", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		res, err := c.Enqueue(ctx, noteArgs{N: 1}, &pgqueue.EnqueueOpts{Queue: "plain", PartitionKey: insertPartitionKey, SequenceKey: insertSequenceKey})
		must(t, err)
		list, err := c.JobList(ctx, &pgqueue.JobListParams{IDs: []int64{res.ID}})
		must(t, err)
		if len(list.Jobs) != 1 || list.Jobs[0].PartitionKey != insertPartitionKey || list.Jobs[0].SequenceKey != insertSequenceKey {
			t.Fatalf("JobList: %+v", list.Jobs)
		}
		// The plain claim, under the claim lock (a sequence's job is
		// claimed only under it).
		jobs, err := pgqueue.Claim(ctx, c, "plain", 10)
		must(t, err)
		if len(jobs) != 1 || jobs[0].PartitionKey != insertPartitionKey || jobs[0].SequenceKey != insertSequenceKey {
			t.Fatalf("claim: %+v", jobs)
		}
		// The control calls return the row too: cancel (a running job's
		// request), then once it is cancelled, retry and delete.
		_, err = pool.Exec(ctx, `UPDATE pgqueue.jobs SET state = 'cancelled', finalized_at = now() WHERE id = $1`, res.ID)
		must(t, err)
		for _, call := range []struct {
			name string
			f    func(context.Context, int64) (*pgqueue.JobRow, error)
		}{{"JobCancel", c.JobCancel}, {"JobRetry", c.JobRetry}, {"JobCancel", c.JobCancel}, {"JobDelete", c.JobDelete}} {
			row, err := call.f(ctx, res.ID)
			must(t, err)
			if row.PartitionKey != insertPartitionKey || row.SequenceKey != insertSequenceKey {
				t.Fatalf("%s: keys %q, %q", call.name, row.PartitionKey, row.SequenceKey)
			}
		}
	})

	t.Run("ClaimStatements", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		q, err := jobsql.Load(pgqueue.SchemaDefault)
		must(t, err)
		// A limited queue, claimed by sql/claim_flow.sql; a plain one by
		// sql/claim.sql; one job by id by sql/claim_id.sql. Each under the
		// claim lock, and read both ways (the claim's own decoding and
		// pgx's scan).
		_, err = pool.Exec(ctx, `INSERT INTO pgqueue.queues (name, max_running) VALUES ('limited', 5)`)
		must(t, err)
		for _, queue := range []string{"limited", "plain"} {
			_, err := c.Enqueue(ctx, noteArgs{N: 1}, &pgqueue.EnqueueOpts{Queue: queue, PartitionKey: insertPartitionKey, SequenceKey: insertSequenceKey})
			must(t, err)
		}
		byID, err := c.Enqueue(ctx, noteArgs{N: 2}, &pgqueue.EnqueueOpts{Queue: "other", PartitionKey: insertLongKey, SequenceKey: insertLongKey})
		must(t, err)
		for _, tc := range []struct {
			name, queue, sql string
			args             []any
			partition, seq   string
		}{
			{"claim_flow.sql", "limited", q.ClaimFlow, []any{"limited", 10, int64(60e6), "w"}, insertPartitionKey, insertSequenceKey},
			{"claim.sql", "plain", q.Claim, []any{"plain", 10, int64(60e6), "w"}, insertPartitionKey, insertSequenceKey},
			{"claim_id.sql", "other", q.ClaimID, []any{byID.ID, int64(60e6), "w"}, insertLongKey, insertLongKey},
		} {
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, q.ClaimLock, pgqueue.SchemaDefault, tc.queue, 1000); err != nil {
					return err
				}
				var fast, generic []*pgqueue.JobRow
				var err error
				if tc.name == "claim.sql" { // leaves out what the claimer knows
					fast, generic, err = pgqueue.ScanClaimedRowsBothWays(ctx, tx, pgqueue.ClaimFill("plain", "w", time.Minute), tc.sql, tc.args...)
				} else {
					fast, generic, err = pgqueue.ScanJobRowsBothWays(ctx, tx, tc.sql, tc.args...)
				}
				if err != nil {
					return err
				}
				if len(generic) != 1 {
					return fmt.Errorf("%d jobs claimed, want 1", len(generic))
				}
				for way, j := range map[string]*pgqueue.JobRow{"own decoding": fast[0], "pgx's scan": generic[0]} {
					if j == nil || j.PartitionKey != tc.partition || j.SequenceKey != tc.seq {
						return fmt.Errorf("%s: %+v, want keys %q, %q", way, j, tc.partition, tc.seq)
					}
				}
				return nil
			})
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
		}
	})

	t.Run("Worker", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		got := make(chan *pgqueue.JobRow, 1)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(_ context.Context, job *pgqueue.Job[noteArgs]) error {
			got <- job.JobRow
			return nil
		}, nil))
		b := startClient(t, pool, ws, nil)
		_, err := b.client.Enqueue(ctx, noteArgs{N: 1}, &pgqueue.EnqueueOpts{PartitionKey: insertPartitionKey, SequenceKey: insertSequenceKey})
		must(t, err)
		var row *pgqueue.JobRow
		select {
		case row = <-got:
		case <-time.After(30 * time.Second):
			t.Fatal("the job was not worked")
		}
		if row.PartitionKey != insertPartitionKey || row.SequenceKey != insertSequenceKey {
			t.Fatalf("the handler's job has keys %q, %q", row.PartitionKey, row.SequenceKey)
		}
	})
}

// TestInsertFlowKeysUniqueUpsert checks the keys on the unique insert's
// second statement (sql/insert_unique_upsert.sql), which runs when the job
// holding the key changed after the first one's snapshot: it inserts the
// job with its keys, or returns the holder with the holder's.
func TestInsertFlowKeysUniqueUpsert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A completed job does not hold the key, as in TestUniqueRacedInsert.
	unique := &pgqueue.UniqueOpts{ByKey: "k", ByState: []pgqueue.JobState{pgqueue.StateScheduled, pgqueue.StateAvailable, pgqueue.StateRunning}}
	opts := &pgqueue.EnqueueOpts{PartitionKey: insertPartitionKey, SequenceKey: insertSequenceKey, Unique: unique}
	holderOpts := &pgqueue.EnqueueOpts{PartitionKey: "holder", Unique: unique}

	t.Run("Inserts", func(t *testing.T) {
		t.Parallel()
		r := newUniqueRace(t, pgx.QueryExecModeCacheStatement)
		victim, other := newClient(t, r.victim, nil), newClient(t, r.pool, nil)
		var holder int64
		res, rounds, err := r.run(t, func() (*pgqueue.EnqueueResult, error) { return victim.Enqueue(ctx, chargeArgs{Order: 1}, opts) },
			func(round int) {
				if round == 1 {
					res, err := other.Enqueue(ctx, chargeArgs{Order: 2}, holderOpts)
					must(t, err)
					holder = res.ID
				}
			}, func(round int) {
				if round == 1 && !r.setState(t, holder, "completed") {
					t.Fatal("the holder's row was locked")
				}
			})
		must(t, err)
		if res.Duplicate || rounds != 2 {
			t.Fatalf("after %d statements: %+v, want a new job after 2", rounds, res)
		}
		checkKeys(t, other, "upsert's insert", res.JobRow, insertPartitionKey, insertSequenceKey)
	})

	t.Run("ReturnsTheHolder", func(t *testing.T) {
		t.Parallel()
		r := newUniqueRace(t, pgx.QueryExecModeCacheStatement)
		victim, other := newClient(t, r.victim, nil), newClient(t, r.pool, nil)
		var ids []int64
		res, rounds, err := r.run(t, func() (*pgqueue.EnqueueResult, error) { return victim.Enqueue(ctx, chargeArgs{Order: 1}, opts) },
			func(int) {
				res, err := other.Enqueue(ctx, chargeArgs{Order: 2}, holderOpts)
				must(t, err)
				ids = append(ids, res.ID)
			}, func(round int) {
				r.setState(t, ids[round-1], "completed")
			})
		must(t, err)
		if !res.Duplicate || res.ID != ids[len(ids)-1] || rounds != 2 {
			t.Fatalf("after %d statements: %+v, want a duplicate of job %d after 2", rounds, res, ids[len(ids)-1])
		}
		if res.PartitionKey != "holder" || res.SequenceKey != "" {
			t.Fatalf("the holder's row has keys %q, %q; want its own", res.PartitionKey, res.SequenceKey)
		}
	})
}

// TestInsertFlowKeysRefused checks that bad keys are refused with
// ErrInvalid, naming the option, by the unique paths too (the others:
// TestBadTextRefusedOnEveryPath), before anything is written.
func TestInsertFlowKeysRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	c := newClient(t, pool, nil)
	for _, tc := range []struct {
		name, option string
		opts         pgqueue.EnqueueOpts
	}{
		{"PartitionKeyTooLong", "PartitionKey", pgqueue.EnqueueOpts{PartitionKey: insertLongKey + "x"}},
		{"PartitionKeyNUL", "PartitionKey", pgqueue.EnqueueOpts{PartitionKey: "a\x00"}},
		{"PartitionKeyInvalidUTF8", "PartitionKey", pgqueue.EnqueueOpts{PartitionKey: "\xff"}},
		{"SequenceKeyTooLong", "SequenceKey", pgqueue.EnqueueOpts{SequenceKey: strings.Repeat("s", 256)}},
		{"SequenceKeyNUL", "SequenceKey", pgqueue.EnqueueOpts{SequenceKey: "\x00"}},
		{"SequenceKeyInvalidUTF8", "SequenceKey", pgqueue.EnqueueOpts{SequenceKey: "s\xe2\x82"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Unique = &pgqueue.UniqueOpts{ByKey: "u"}
			_, err := c.Enqueue(ctx, noteArgs{N: 1}, &opts)
			if !errors.Is(err, pgqueue.ErrInvalid) || !strings.Contains(err.Error(), tc.option) {
				t.Errorf("unique Enqueue: %v, want ErrInvalid naming %s", err, tc.option)
			}
			_, err = c.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{{Args: noteArgs{N: 2}}, {Args: noteArgs{N: 3}, Opts: &opts}})
			if !errors.Is(err, pgqueue.ErrInvalid) || !strings.Contains(err.Error(), "job 1") {
				t.Errorf("unique EnqueueMany: %v, want ErrInvalid for job 1", err)
			}
			params := append(flowManyParams(pgqueue.CopyThreshold-1, false), pgqueue.EnqueueManyParams{Args: noteArgs{N: 1}, Opts: &tc.opts})
			_, err = c.EnqueueMany(ctx, params)
			if !errors.Is(err, pgqueue.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprint("job ", pgqueue.CopyThreshold-1)) {
				t.Errorf("EnqueueMany (COPY): %v, want ErrInvalid for its last job", err)
			}
		})
	}
	if n := countJobs(t, pool, "true"); n != 0 {
		t.Fatalf("refused inserts left %d jobs", n)
	}
}
