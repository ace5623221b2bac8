package pgqueue_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/internal/testlog"
	"github.com/pgqueue/pgqueue/pglock"
)

// execModes are every pgx query exec mode, by the name
// default_query_exec_mode takes in a connection string.
var execModes = []struct {
	name string
	mode pgx.QueryExecMode
}{
	{"cache_statement", pgx.QueryExecModeCacheStatement},
	{"cache_describe", pgx.QueryExecModeCacheDescribe},
	{"describe_exec", pgx.QueryExecModeDescribeExec},
	{"exec", pgx.QueryExecModeExec},
	{"simple_protocol", pgx.QueryExecModeSimpleProtocol},
}

// poolWithMode returns a pool on connString whose connections run every
// statement in mode.
func poolWithMode(t testing.TB, connString string, mode pgx.QueryExecMode, tweaks ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(connString)
	must(t, err)
	cfg.ConnConfig.DefaultQueryExecMode = mode
	cfg.MaxConns = 10
	for _, tweak := range tweaks {
		tweak(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	must(t, err)
	t.Cleanup(pool.Close)
	return pool
}

type modeArgs struct {
	N    int    `json:"n"`
	Note string `json:"note"`
	// Do says what the handler does: "ok", "retry" (fail once), "snooze"
	// (once), "cancel" (wait to be cancelled), "tx" (CompleteTx).
	Do string `json:"do"`
}

func (modeArgs) Kind() string { return "mode" }

// TestExecModes runs the main flows in every query exec mode on a direct
// connection: inserts of every path (single, unique, small batch, unique
// batch, COPY), work with retry, snooze, cancel and CompleteTx, a periodic
// job, JobList with an args filter, and a queue pause.
func TestExecModes(t *testing.T) {
	t.Parallel()
	for _, m := range execModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			if m.mode != pgx.QueryExecModeCacheStatement {
				skipInShortMode(t, "the main flows in exec mode "+m.name+" (cache_statement, pgx's default, runs)")
			}
			pool := poolWithMode(t, pgtest.DB().NewDatabase(t), m.mode)
			runExecModeFlows(t, pool)
			runLockFlows(t, pool, nil, false)
		})
	}
	// Settings seen behind poolers: no statement or description cache.
	t.Run("exec_without_caches", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "the main flows without statement and description caches (as behind poolers)")
		runExecModeFlows(t, poolWithMode(t, pgtest.DB().NewDatabase(t), pgx.QueryExecModeExec, func(c *pgxpool.Config) {
			c.ConnConfig.StatementCacheCapacity, c.ConnConfig.DescriptionCacheCapacity = 0, 0
		}))
	})
}

// runExecModeFlows runs the flows of TestExecModes on pool.
func runExecModeFlows(t *testing.T, pool *pgxpool.Pool) {
	ctx := t.Context()
	var log testlog.Buffer
	var attempts, snoozes atomic.Int64
	var client atomic.Pointer[pgqueue.Client]
	// Closed when the "cancel" job's handler runs: a job is running in
	// the table from its claim, before its handler starts, and a cancel
	// landing in between is heard at the next heartbeat (10 s).
	cancelRuns := make(chan struct{})
	var cancelRunsOnce sync.Once
	workers := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[modeArgs]) error {
		attempts.Add(1)
		switch job.Args.Do {
		case "retry":
			if job.Attempt == 1 {
				return errors.New("first attempt fails")
			}
		case "snooze":
			if snoozes.Add(1) == 1 {
				return pgqueue.JobSnooze(10 * time.Millisecond)
			}
		case "cancel":
			cancelRunsOnce.Do(func() { close(cancelRuns) })
			<-ctx.Done()
			return ctx.Err()
		case "tx":
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
			if err := client.Load().CompleteTx(ctx, tx, job.JobRow); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}
		// Errors are returned, not fatal: this is not the test's goroutine.
		if err := pgqueue.RecordProgress(ctx, map[string]int{"at": job.Args.N}); err != nil {
			return err
		}
		return pgqueue.RecordOutput(ctx, map[string]string{"note": job.Args.Note})
	}, nil))
	periodic := pgqueue.NewPeriodicJob("tick", pgqueue.EverySchedule(time.Hour), func() (pgqueue.JobArgs, *pgqueue.EnqueueOpts) {
		return modeArgs{N: -1, Do: "ok", Note: "periodic"}, &pgqueue.EnqueueOpts{Tags: []string{"periodic"}, Meta: map[string]any{"m": 1}}
	}, &pgqueue.PeriodicJobOpts{RunOnStart: true})
	b := startClient(t, pool, workers, &pgqueue.Config{
		Logger: log.Logger(), PeriodicJobs: []*pgqueue.PeriodicJob{periodic},
		Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 4}, "paused": {MaxWorkers: 2}},
	})
	c := b.client
	client.Store(c)

	// Every insert path; args and meta with characters JSON escapes.
	note := "quote \" backslash \\ é \u2028"
	opts := &pgqueue.EnqueueOpts{Tags: []string{"a", "b"}, Meta: map[string]any{"note": note}}
	var ids []int64
	for _, do := range []string{"ok", "retry", "snooze", "tx"} {
		res, err := c.Enqueue(ctx, modeArgs{N: 1, Note: note, Do: do}, opts)
		if err != nil {
			t.Fatalf("enqueue %s: %v", do, err)
		}
		ids = append(ids, res.ID)
	}
	tx, err := pool.Begin(ctx)
	must(t, err)
	_, err = c.EnqueueTx(ctx, tx, modeArgs{N: 2, Note: note, Do: "ok"}, opts)
	must(t, err)
	must(t, tx.Commit(ctx))
	uopts := &pgqueue.EnqueueOpts{Unique: &pgqueue.UniqueOpts{ByArgs: true}}
	first, err := c.Enqueue(ctx, modeArgs{N: 3, Note: note, Do: "ok"}, uopts)
	must(t, err)
	again, err := c.Enqueue(ctx, modeArgs{N: 3, Note: note, Do: "ok"}, uopts)
	must(t, err)
	if first.Duplicate || !again.Duplicate || again.ID != first.ID {
		t.Fatalf("unique insert: first %+v, again %+v", first.Duplicate, again.Duplicate)
	}
	small := make([]pgqueue.EnqueueManyParams, 10)
	for i := range small {
		small[i] = pgqueue.EnqueueManyParams{Args: modeArgs{N: 100 + i, Note: note, Do: "ok"}, Opts: opts}
	}
	if res, err := c.EnqueueMany(ctx, small); err != nil || res.Enqueued != 10 {
		t.Fatalf("enqueue many (small): %+v, %v", res, err)
	}
	uniq := []pgqueue.EnqueueManyParams{
		{Args: modeArgs{N: 3, Note: note, Do: "ok"}, Opts: uopts},
		{Args: modeArgs{N: 4, Note: note, Do: "ok"}, Opts: uopts},
		{Args: modeArgs{N: 4, Note: note, Do: "ok"}, Opts: uopts},
	}
	if res, err := c.EnqueueMany(ctx, uniq); err != nil || res.Enqueued != 1 || len(res.Duplicates) != 2 {
		t.Fatalf("enqueue many (unique): %+v, %v", res, err)
	}
	big := make([]pgqueue.EnqueueManyParams, 100)
	for i := range big {
		big[i] = pgqueue.EnqueueManyParams{Args: modeArgs{N: 1000 + i, Note: note, Do: "ok"}, Opts: opts}
	}
	if res, err := c.EnqueueMany(ctx, big); err != nil || res.Enqueued != 100 {
		t.Fatalf("enqueue many (COPY): %+v, %v", res, err)
	}
	// A workflow: a batch with a dependency, and one more job after it.
	flow, err := c.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{{Args: modeArgs{N: 7, Do: "ok"}},
		{Args: modeArgs{N: 8, Do: "ok"}, Opts: &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnIndex(0)}}}})
	must(t, err)
	last, err := c.Enqueue(ctx, modeArgs{N: 9, Do: "ok"}, &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnJob(flow.IDs[1])}})
	must(t, err)
	cancelled, err := c.Enqueue(ctx, modeArgs{N: 5, Do: "cancel"}, nil)
	must(t, err)

	// Pause a queue, enqueue there, and see nothing run until resumed.
	must(t, c.QueuePause(ctx, "paused"))
	held, err := c.Enqueue(ctx, modeArgs{N: 6, Do: "ok"}, &pgqueue.EnqueueOpts{Queue: "paused"})
	must(t, err)

	select {
	case <-cancelRuns:
	case <-time.After(30 * time.Second):
		t.Fatal("the job to cancel never ran")
	}
	_, err = c.JobCancel(ctx, cancelled.ID)
	must(t, err)
	waitState(t, pool, cancelled.ID, "cancelled")
	// 4 singles, 1 in a tx, 2 unique, 10 small, 100 COPY, the periodic and
	// the workflow's 3.
	const completed = 4 + 1 + 2 + 10 + 100 + 1 + 3
	waitFor(t, "every job completed", func() bool { return countJobs(t, pool, "state = 'completed'") == completed })
	if s := readJob(t, pool, held.ID); s.state != "available" {
		t.Fatalf("job on a paused queue is %s", s.state)
	}
	must(t, c.QueueResume(ctx, "paused"))
	waitState(t, pool, held.ID, "completed")

	if w, err := c.WorkflowGet(ctx, flow.Workflow); err != nil || !w.Done() || len(w.Jobs) != 3 || w.Jobs[2].ID != last.ID {
		t.Fatalf("workflow: %+v, %v", w, err)
	}
	if s := readJob(t, pool, ids[1]); s.attempt != 2 || len(s.errors) != 1 {
		t.Fatalf("retried job: attempt %d, errors %v", s.attempt, s.errors)
	}
	if n := countJobs(t, pool, "args->>'note' = $1 AND meta->>'note' = $1 AND tags = '{a,b}'", note); n != 4+1+10+100 {
		t.Fatalf("%d jobs kept args, meta and tags exactly, want %d", n, 4+1+10+100)
	}
	if n := countJobs(t, pool, "meta->'periodic'->>'name' = 'tick' AND args->>'note' = 'periodic'"); n != 1 {
		t.Fatalf("%d periodic jobs", n)
	}
	list, err := c.JobList(ctx, &pgqueue.JobListParams{ArgsContain: map[string]any{"note": note, "n": 1}, Tags: []string{"a"}})
	must(t, err)
	if len(list.Jobs) != 4 {
		t.Fatalf("JobList by args found %d jobs, want 4", len(list.Jobs))
	}
	got, err := c.JobGet(ctx, ids[0])
	must(t, err)
	if got.State != pgqueue.StateCompleted {
		t.Fatalf("JobGet: %s", got.State)
	}
	if errs := errorLines(log.String()); len(errs) > 0 {
		t.Fatalf("%d errors logged, first: %s", len(errs), errs[0])
	}
}

// errorLines returns the lines of a text log at level ERROR.
func errorLines(log string) []string {
	var out []string
	for line := range strings.Lines(log) {
		if strings.Contains(line, "level=ERROR") {
			out = append(out, line)
		}
	}
	return out
}

// runLockFlows takes each kind of pglock lock through pool: a transaction
// lock with its fence checked, a lease renewed and released, and a session
// lock on direct (nil: the pool's own connection settings). With
// refuseSession, the session lock must be refused.
func runLockFlows(t *testing.T, pool *pgxpool.Pool, direct *pgx.ConnConfig, refuseSession bool) {
	t.Helper()
	ctx := t.Context()
	lk, err := pglock.New(pool, &pglock.Config{DirectConnConfig: direct, Logger: testlog.Discard()})
	must(t, err)
	tx, err := pool.Begin(ctx)
	must(t, err)
	fence, err := lk.LockXact(ctx, tx, "xact")
	must(t, err)
	must(t, lk.CheckFenceTx(ctx, tx, "xact", fence))
	must(t, tx.Commit(ctx))
	lease, err := lk.TryLockLease(ctx, "lease", "me", 10*time.Second)
	must(t, err)
	must(t, lease.Renew(ctx))
	must(t, lease.Release(ctx))
	session, err := lk.TryLockSession(ctx, "session", nil)
	if refuseSession {
		if !errors.Is(err, pglock.ErrNoSessionAffinity) {
			t.Fatalf("session lock: %v, want ErrNoSessionAffinity", err)
		}
		return
	}
	must(t, err)
	if _, err := lk.TryLockSession(ctx, "session", nil); !errors.Is(err, pglock.ErrBusy) {
		t.Fatalf("second session lock: %v, want ErrBusy", err)
	}
	must(t, session.Unlock(ctx))
}
