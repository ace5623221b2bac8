package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

// The helpers and job args shared by the root package's tests. A helper or
// args type used by one file's tests lives in that file.

type noteArgs struct {
	N int `json:"n"`
}

func (noteArgs) Kind() string { return "note" }

type emailArgs struct {
	To string `json:"to"`
}

func (emailArgs) Kind() string { return "email" }

// emptyKindArgs has a kind nothing accepts.
type emptyKindArgs struct{}

func (emptyKindArgs) Kind() string { return "" }

// noteParams returns n jobs to enqueue, of args noteArgs{N: 0} to
// noteArgs{N: n-1}.
func noteParams(n int) []pgqueue.EnqueueManyParams {
	params := make([]pgqueue.EnqueueManyParams, n)
	for i := range params {
		params[i] = pgqueue.EnqueueManyParams{Args: noteArgs{N: i}}
	}
	return params
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// newPool returns a pool on a fresh database of the test's own, closed when
// the test ends.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, _ := newTracedPool(t, nil)
	return pool
}

// newTracedPool is newPool whose connections report to tracer (none when
// nil); it also returns the database's connection string.
func newTracedPool(t testing.TB, tracer pgx.QueryTracer) (*pgxpool.Pool, string) {
	t.Helper()
	connString := pgtest.DB().NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = int32(pgtest.TestConns())
	if tracer != nil {
		cfg.ConnConfig.Tracer = tracer
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closePool(t, pool) })
	return pool, connString
}

// closePool closes pool, but does not wait forever: a test that failed
// with a transaction open never releases its connection, and pool.Close
// would then hang until the package's timeout, hiding which test failed.
func closePool(t testing.TB, pool *pgxpool.Pool) {
	closed := make(chan struct{})
	go func() {
		pool.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		st := pool.Stat()
		t.Errorf("pool not closed after 10s: a connection is still acquired (a transaction left open by a failed test?); "+
			"%d acquired, %d total; the database's sessions:\n%s\ngoroutines in pgx:\n%s",
			st.AcquiredConns(), st.TotalConns(), sessions(pool.Config().ConnConfig), pgxGoroutines())
	}
}

// sessions lists the server's sessions in cfg's database, from a
// connection of its own: what a connection that does not close is doing.
func sessions(cfg *pgx.ConnConfig) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return err.Error()
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT format('pid %s %s %s/%s xact %s query %s: %s', pid, state, wait_event_type, wait_event,
	                                     now() - xact_start, now() - query_start, left(query, 300))
	                              FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		return err.Error()
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err.Error()
	}
	return strings.Join(lines, "\n")
}

// pgxGoroutines returns the stacks of the test binary's goroutines that
// are inside pgx: whoever holds a connection that was not given back is
// among them (or shows none, having leaked it).
func pgxGoroutines() string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/jackc/pgx") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

func newClient(t testing.TB, pool *pgxpool.Pool, cfg *pgqueue.Config) *pgqueue.Client {
	t.Helper()
	c, err := pgqueue.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// workBundle is a started client with its pool.
type workBundle struct {
	pool   *pgxpool.Pool
	client *pgqueue.Client
}

// startClient starts a client working queue "default" with the given workers
// and stops it when the test ends.
func startClient(t *testing.T, pool *pgxpool.Pool, workers *pgqueue.Workers, cfg *pgqueue.Config) *workBundle {
	t.Helper()
	if cfg == nil {
		cfg = &pgqueue.Config{}
	}
	cfg.Workers = workers
	if cfg.Queues == nil {
		cfg.Queues = map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 4}}
	}
	if cfg.FetchPollInterval == 0 {
		cfg.FetchPollInterval = 50 * time.Millisecond
	}
	if cfg.SchedulerInterval == 0 {
		cfg.SchedulerInterval = 100 * time.Millisecond
	}
	if cfg.RetryPolicy == nil {
		cfg.RetryPolicy = pgqueue.RetryPolicyFunc(func(int, error) time.Duration { return 0 })
	}
	c := newClient(t, pool, cfg)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Stop(ctx); err != nil && !errors.Is(err, pgqueue.ErrNotStarted) {
			t.Errorf("stop: %v", err)
		}
	})
	return &workBundle{pool: pool, client: c}
}

func countJobs(t *testing.T, pool *pgxpool.Pool, where string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pgqueue.jobs WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// jobState reads a job back.
type jobState struct {
	state    string
	attempt  int
	fence    *int64
	errors   []string
	traces   []string
	runAt    time.Time
	attempts *time.Time
}

func readJob(t *testing.T, pool *pgxpool.Pool, id int64) jobState {
	t.Helper()
	var s jobState
	err := pool.QueryRow(context.Background(), `
		SELECT pgqueue.job_state(state, gate_id, queue), attempt, fence, run_at, attempted_at,
		       coalesce((SELECT array_agg(e->>'error') FROM jsonb_array_elements(errors) e), '{}'),
		       coalesce((SELECT array_agg(coalesce(e->>'trace', '')) FROM jsonb_array_elements(errors) e), '{}')
		FROM pgqueue.jobs WHERE id = $1`, id).Scan(&s.state, &s.attempt, &s.fence, &s.runAt, &s.attempts, &s.errors, &s.traces)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitState(t *testing.T, pool *pgxpool.Pool, id int64, want string) jobState {
	t.Helper()
	var s jobState
	waitFor(t, fmt.Sprintf("job %d to be %s", id, want), func() bool {
		s = readJob(t, pool, id)
		return s.state == want
	})
	return s
}

// auditUpdates counts every update of pgqueue.jobs by the state it wrote
// (see updatesTo).
func auditUpdates(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		CREATE TABLE job_updates (job_id bigint, state text, fence bigint);
		CREATE FUNCTION audit_update() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO job_updates VALUES (NEW.id, NEW.state, NEW.fence);
			RETURN NEW;
		END $$;
		CREATE TRIGGER audit_update AFTER UPDATE ON pgqueue.jobs FOR EACH ROW EXECUTE FUNCTION audit_update();`)
	must(t, err)
}

// updatesTo returns how many updates auditUpdates saw set job id to state.
func updatesTo(t *testing.T, pool *pgxpool.Pool, id int64, state string) int {
	t.Helper()
	var n int
	must(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM job_updates WHERE job_id = $1 AND state = $2", id, state).Scan(&n))
	return n
}

// claimAsDeadWorker claims job id the way a worker would and lets its lease
// expire at once, as if that worker had died. It returns the claim's fence.
func claimAsDeadWorker(t *testing.T, pool *pgxpool.Pool, id int64) int64 {
	t.Helper()
	var fence int64
	must(t, pool.QueryRow(context.Background(), `
		UPDATE pgqueue.jobs SET state = 'running', attempt = attempt + 1, fence = nextval('pgqueue.fence_seq'),
			lease_until = now() - interval '1 second', worker_id = 'dead-worker', attempted_at = now()
		WHERE id = $1 RETURNING fence`, id).Scan(&fence))
	return fence
}
