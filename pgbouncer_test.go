package pgqueue_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgbouncer"
	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/internal/testlog"
)

// throughPgBouncer returns a fresh database's direct connection string and
// the same database through a PgBouncer of the test's own, run from the
// shipped configuration with a pool of 4 server connections, so that
// clients share backends and a session's state meets the next client.
func throughPgBouncer(t *testing.T) (direct, pooled string) {
	t.Helper()
	direct = pgtest.DB().NewDatabase(t)
	cfg, err := pgx.ParseConfig(direct)
	must(t, err)
	return direct, pgbouncer.Require(t, direct, &pgbouncer.Options{PoolSize: 4}).ConnString(cfg.Database)
}

// Through PgBouncer in transaction mode, the modes that keep no prepared
// statement from one round trip to the next run every flow; the two that
// do (pgx's default cache_statement, and describe_exec) are refused at
// Start with ErrPoolerExecMode instead of failing at random under load.
func TestPgBouncerExecModes(t *testing.T) {
	t.Parallel()
	for _, m := range execModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			direct, pooled := throughPgBouncer(t)
			directCfg, err := pgx.ParseConfig(direct)
			must(t, err)
			pool := poolWithMode(t, pooled, m.mode)
			switch m.mode {
			case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeDescribeExec:
				c := newClient(t, pool, &pgqueue.Config{Workers: pgqueue.NewWorkers(), Logger: testlog.Discard()})
				if err := c.Start(t.Context()); !errors.Is(err, pgqueue.ErrPoolerExecMode) {
					t.Fatalf("Start through PgBouncer in %s mode: %v, want ErrPoolerExecMode", m.name, err)
				}
			default:
				runExecModeFlows(t, pool)
				runLockFlows(t, pool, nil, true)
				runLockFlows(t, pool, directCfg, false)
			}
		})
	}
}

// Behind a pooler LISTEN does not work: without a direct connection the
// client says so once and polls; with Config.DirectConnConfig it listens
// there, so a job enqueued while the poll interval is an hour still runs
// at once. A DirectConnConfig that goes through the pooler is refused.
func TestPgBouncerNotifications(t *testing.T) {
	t.Parallel()
	direct, pooled := throughPgBouncer(t)
	directCfg, err := pgx.ParseConfig(direct)
	must(t, err)
	pooledCfg, err := pgx.ParseConfig(pooled)
	must(t, err)

	t.Run("PollsAndWarnsOnce", func(t *testing.T) {
		var log testlog.Buffer
		pool := poolWithMode(t, pooled, pgx.QueryExecModeExec)
		startClient(t, pool, countingNoteWorkers(t, nil), &pgqueue.Config{Logger: log.Logger()})
		// Another client enqueues: its Enqueue cannot wake the worker's
		// producer in process.
		res, err := newClient(t, pool, nil).Enqueue(t.Context(), noteArgs{N: 1}, nil)
		must(t, err)
		waitState(t, pool, res.ID, "completed")
		if n := strings.Count(log.String(), "connection pooler"); n != 1 {
			t.Fatalf("%d warnings about the pooler, want 1:\n%s", n, log.String())
		}
	})

	t.Run("ListensOnDirectConnection", func(t *testing.T) {
		var log testlog.Buffer
		pool := poolWithMode(t, pooled, pgx.QueryExecModeExec)
		startClient(t, pool, countingNoteWorkers(t, nil), &pgqueue.Config{
			Logger: log.Logger(), DirectConnConfig: directCfg, FetchPollInterval: time.Hour,
		})
		producer := newClient(t, pool, nil)
		// A notification needs the listener connected; give the first
		// job until it runs, then time the second.
		res, err := producer.Enqueue(t.Context(), noteArgs{N: 1}, nil)
		must(t, err)
		waitState(t, pool, res.ID, "completed")
		start := time.Now()
		res, err = producer.Enqueue(t.Context(), noteArgs{N: 2}, nil)
		must(t, err)
		waitState(t, pool, res.ID, "completed")
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("job took %v with an hour's poll interval: no notification", d)
		}
		if strings.Contains(log.String(), "level=WARN") {
			t.Fatalf("warnings with a direct connection:\n%s", log.String())
		}
	})

	t.Run("DirectThroughPoolerRefused", func(t *testing.T) {
		pool := poolWithMode(t, pooled, pgx.QueryExecModeExec)
		c := newClient(t, pool, &pgqueue.Config{Workers: countingNoteWorkers(t, nil), Logger: testlog.Discard(), DirectConnConfig: pooledCfg})
		if err := c.Start(t.Context()); !errors.Is(err, pgqueue.ErrInvalid) {
			t.Fatalf("Start with a DirectConnConfig through the pooler: %v, want ErrInvalid", err)
		}
	})
}

// noteWorkers returns workers for noteArgs that count each job's runs in
// runs, when not nil.
func countingNoteWorkers(t *testing.T, runs *jobRuns) *pgqueue.Workers {
	t.Helper()
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
		if runs != nil {
			runs.add(job.ID)
		}
		return nil
	}, nil))
	return ws
}

// jobRuns counts the runs of each job.
type jobRuns struct {
	mu sync.Mutex
	n  map[int64]int
}

func (r *jobRuns) add(id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[int64]int{}
	}
	r.n[id]++
}

// twice returns the jobs run more than once, and how many jobs ran.
func (r *jobRuns) twice() (ids []int64, ran int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, n := range r.n {
		if n > 1 {
			ids = append(ids, id)
		}
	}
	return ids, len(r.n)
}

// 10,000 jobs through PgBouncer in transaction mode, two clients with the
// recommended settings (cache_describe, a direct connection for LISTEN):
// every job completed on its first attempt, none run twice, no warning or
// error logged.
func TestPgBouncer10000Jobs(t *testing.T) {
	t.Parallel()
	const jobs = 10_000
	direct, pooled := throughPgBouncer(t)
	directCfg, err := pgx.ParseConfig(direct)
	must(t, err)
	var log testlog.Buffer
	var runs jobRuns
	var pools []*pgxpool.Pool
	for range 2 {
		pool := poolWithMode(t, pooled, pgx.QueryExecModeCacheDescribe)
		pools = append(pools, pool)
		startClient(t, pool, countingNoteWorkers(t, &runs), &pgqueue.Config{
			Logger: log.Logger(), DirectConnConfig: directCfg,
			Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 20}},
		})
	}
	c := newClient(t, pools[0], nil)
	ctx := t.Context()
	start := time.Now()
	// Singles, small batches and COPY batches, from both pools.
	for i := range 200 {
		_, err := c.Enqueue(ctx, noteArgs{N: i}, nil)
		must(t, err)
	}
	for b := range 30 {
		params := make([]pgqueue.EnqueueManyParams, 10)
		for i := range params {
			params[i] = pgqueue.EnqueueManyParams{Args: noteArgs{N: b*10 + i}}
		}
		_, err := c.EnqueueMany(ctx, params)
		must(t, err)
	}
	c2 := newClient(t, pools[1], nil)
	for left := jobs - 200 - 300; left > 0; left -= 500 {
		params := make([]pgqueue.EnqueueManyParams, min(500, left))
		for i := range params {
			params[i] = pgqueue.EnqueueManyParams{Args: noteArgs{N: i}}
		}
		_, err := c2.EnqueueMany(ctx, params)
		must(t, err)
	}
	pool := pools[0]
	deadline := time.Now().Add(3 * time.Minute)
	for countJobs(t, pool, "state = 'completed'") < jobs {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs completed after 3 minutes", countJobs(t, pool, "state = 'completed'"), jobs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	elapsed := time.Since(start)
	if n := countJobs(t, pool, "true"); n != jobs {
		t.Fatalf("%d jobs stored, want %d", n, jobs)
	}
	if n := countJobs(t, pool, "attempt <> 1 OR state <> 'completed'"); n != 0 {
		t.Fatalf("%d jobs not completed on their first attempt", n)
	}
	twice, ran := runs.twice()
	if len(twice) > 0 || ran != jobs {
		t.Fatalf("%d jobs ran, %d of them more than once (%v)", ran, len(twice), twice[:min(10, len(twice))])
	}
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Fatalf("logged: %s", line)
		}
	}
	t.Logf("%d jobs through PgBouncer (transaction mode, cache_describe), 2 clients: all done once in %v", jobs, elapsed.Round(time.Millisecond))
}

// Through PgBouncer in transaction mode, flow limits hold: the claim lock
// is transaction-scoped, and so is the setting that says it was granted,
// so a backend that served one client's claim tells the next nothing.
func TestPgBouncerFlowLimits(t *testing.T) {
	t.Parallel()
	for _, m := range execModes {
		if m.mode == pgx.QueryExecModeCacheStatement || m.mode == pgx.QueryExecModeDescribeExec {
			continue // refused through a pooler (TestPgBouncerExecModes)
		}
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			_, pooled := throughPgBouncer(t)
			runLimitedClients(t, poolWithMode(t, pooled, m.mode))
		})
	}
}
