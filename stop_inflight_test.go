package pgqueue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/jobsql"
)

// endTracer records how the statements it watches ended.
type endTracer struct {
	watch map[string]string // statement → its name in messages
	mu    sync.Mutex
	ended map[string][]error
}

type endTracerKey struct{}

func (e *endTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, endTracerKey{}, d.SQL)
}

func (e *endTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	sql, _ := ctx.Value(endTracerKey{}).(string)
	name, ok := e.watch[sql]
	if !ok {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ended[name] = append(e.ended[name], d.Err)
}

// errs returns how each run of the statement called name ended so far.
func (e *endTracer) errs(name string) []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.ended[name]...)
}

// TestStopLetsStatementsInFlightFinish: Stop does not cancel the poll or
// the pruner's batch in flight; it waits for them. A statement cancelled
// in flight costs its connection, and a TLS connection cut while it wrote
// held the pool's Close for pgx's 15 s (the test suite's pools did not
// close in 10 s against a server with TLS). The jobs table is locked so
// that both statements are still waiting when Stop is called.
func TestStopLetsStatementsInFlightFinish(t *testing.T) {
	t.Parallel()
	q, err := jobsql.Load(pgqueue.SchemaDefault)
	must(t, err)
	tr := &endTracer{watch: map[string]string{q.Poll: "poll", q.Prune: "prune"}, ended: map[string][]error{}}
	pool, url := newTracedPool(t, tr)

	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(context.Context, *pgqueue.Job[noteArgs]) error { return nil }, nil))
	c := newClient(t, pool, &pgqueue.Config{Workers: ws, FetchPollInterval: 50 * time.Millisecond, PruneInterval: 50 * time.Millisecond,
		Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 2}}})
	ctx := t.Context()
	must(t, c.Start(ctx))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = c.Stop(context.Background())
		}
	})

	locker, err := pgx.Connect(ctx, url)
	must(t, err)
	defer locker.Close(context.Background())
	watcher, err := pgx.Connect(ctx, url)
	must(t, err)
	defer watcher.Close(context.Background())
	tx, err := locker.Begin(ctx)
	must(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(ctx, "LOCK TABLE pgqueue.jobs IN ACCESS EXCLUSIVE MODE")
	must(t, err)

	// waiting reports whether a poll and a prune both wait for the lock.
	waiting := func() bool {
		var polls, prunes int
		// query holds the first track_activity_query_size bytes.
		err := watcher.QueryRow(ctx, `SELECT count(*) FILTER (WHERE starts_with($1, query)), count(*) FILTER (WHERE starts_with($2, query))
			FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`, q.Poll, q.Prune).Scan(&polls, &prunes)
		must(t, err)
		return polls > 0 && prunes > 0
	}
	for deadline := time.Now().Add(time.Minute); !waiting(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no poll and prune waiting for the lock on jobs after a minute")
		}
	}
	stopErr := make(chan error, 1)
	go func() { stopErr <- c.Stop(context.Background()) }()
	// Cancelled, they would stop waiting within milliseconds; left to
	// finish, they wait as long as the lock is held.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && waiting(); {
		time.Sleep(20 * time.Millisecond)
	}
	if !waiting() {
		t.Fatalf("Stop cancelled the statements in flight: poll %v, prune %v", tr.errs("poll"), tr.errs("prune"))
	}
	select {
	case err := <-stopErr:
		t.Fatalf("Stop returned (%v) while its statements were in flight", err)
	default:
	}
	must(t, tx.Rollback(ctx))
	select {
	case err := <-stopErr:
		stopped = true
		must(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Stop did not return within 30 s of the lock's release")
	}
	for _, name := range []string{"poll", "prune"} {
		errs := tr.errs(name)
		if len(errs) == 0 {
			t.Errorf("no %s ended", name)
		}
		for _, err := range errs {
			if err != nil {
				t.Errorf("a %s ended with %v", name, err)
			}
		}
	}
	if st := pool.Stat(); st.AcquiredConns() != 0 {
		t.Errorf("%d connections still acquired after Stop", st.AcquiredConns())
	}
}
