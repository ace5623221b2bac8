package pgqueue_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/jobsql"
)

// recordingTracer notes every statement pgx tells a tracer about: single
// statements, the statements of a batch, prepares, and COPYs (as "COPY"
// and the table and columns a tracer is given).
type recordingTracer struct {
	mu      sync.Mutex
	seen    map[string]bool
	changed chan struct{} // closed and replaced at each new statement
}

func newRecordingTracer() *recordingTracer {
	return &recordingTracer{seen: map[string]bool{}, changed: make(chan struct{})}
}

func (r *recordingTracer) note(sql string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.seen[sql] {
		r.seen[sql] = true
		close(r.changed)
		r.changed = make(chan struct{})
	}
}

// await returns once a statement for which match holds has been seen, or
// fails the test when ctx ends first.
func (r *recordingTracer) await(ctx context.Context, t *testing.T, what string, match func(sql string) bool) {
	t.Helper()
	for {
		r.mu.Lock()
		for sql := range r.seen {
			if match(sql) {
				r.mu.Unlock()
				return
			}
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			r.mu.Lock()
			seen := make([]string, 0, len(r.seen))
			for sql := range r.seen {
				seen = append(seen, strings.Join(strings.Fields(sql), " "))
			}
			r.mu.Unlock()
			slices.Sort(seen)
			t.Fatalf("the tracer never saw %s; it saw:\n%s", what, strings.Join(seen, "\n"))
		}
	}
}

func (r *recordingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.note(d.SQL)
	return ctx
}

func (r *recordingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *recordingTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (r *recordingTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.note(d.SQL)
}

func (r *recordingTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (r *recordingTracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	r.note(d.SQL)
	return ctx
}

func (r *recordingTracer) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

type copyTraceKey struct{}

func (r *recordingTracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	return context.WithValue(ctx, copyTraceKey{}, d)
}

// TraceCopyFromEnd notes a COPY once it ended, so that a COPY seen also
// had its end reported, with the rows it wrote.
func (r *recordingTracer) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceCopyFromEndData) {
	start, _ := ctx.Value(copyTraceKey{}).(pgx.TraceCopyFromStartData)
	r.note(fmt.Sprintf("COPY %s (%s) %s err=%v", start.TableName.Sanitize(), strings.Join(start.ColumnNames, ", "), d.CommandTag, d.Err))
}

// A tracer on the pool's ConnConfig (otelpgx, say) sees every kind of
// statement a running client sends: inserts and their NOTIFY, both COPYs
// of EnqueueMany, the claim, the result, and the leader's maintenance.
func TestTracerSeesEveryStatementKind(t *testing.T) {
	t.Parallel()
	tr := newRecordingTracer()
	pool, _ := newTracedPool(t, tr)

	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(context.Context, *pgqueue.Job[noteArgs]) error { return nil }, nil))
	b := startClient(t, pool, ws, &pgqueue.Config{RescueInterval: 100 * time.Millisecond, PruneInterval: 100 * time.Millisecond})

	ctx := t.Context()
	_, err := b.client.Enqueue(ctx, noteArgs{N: -1}, nil)
	must(t, err)
	params := noteParams(pgqueue.CopyThreshold)
	params[0].Opts = &pgqueue.EnqueueOpts{RunAt: time.Now().Add(-time.Hour)} // the scheduled COPY, made due by the scheduler
	_, err = b.client.EnqueueMany(ctx, params)
	must(t, err)

	q, err := jobsql.Load(pgqueue.SchemaDefault)
	must(t, err)
	is := func(stmts ...string) func(string) bool {
		return func(sql string) bool { return slices.Contains(stmts, sql) }
	}
	copyOf := func(columns string, rows int) func(string) bool {
		want := fmt.Sprintf(`COPY "pgqueue"."jobs" (%s) COPY %d err=<nil>`, columns, rows)
		return func(sql string) bool { return sql == want }
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, want := range []struct {
		what  string
		match func(string) bool
	}{
		{"the insert", is(q.Insert)},
		{"the insert's NOTIFY", is(q.Notify)},
		{"the COPY of due jobs", copyOf("queue, kind, args, priority, max_attempts, tags, meta, singleton_key, partition_key, sequence_key", pgqueue.CopyThreshold-1)},
		{"the COPY of scheduled jobs", copyOf("queue, kind, args, priority, max_attempts, tags, meta, singleton_key, partition_key, sequence_key, run_at, state", 1)},
		{"the COPY's NOTIFY", is(q.NotifyQueues)},
		{"the claim", is(q.Claim, q.ClaimLock)},
		{"a result", is(q.Complete, q.CompleteMany, q.Finish)},
		{"the scheduler", is(q.Schedule)},
		{"the rescuer", is(q.RescueCandidates)},
		{"the pruner", is(q.Prune)},
	} {
		tr.await(waitCtx, t, want.what, want.match)
	}
}
