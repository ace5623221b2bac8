package bench

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// Usage is what a timed run cost on both sides, for its Result.
type Usage struct {
	// ClientCPU is the CPU time (user + system, getrusage) of the client
	// process, or the sum of the child processes' with Processes, less
	// what the server CPU sampler's own goroutine used (on a thread of its
	// own, measured by that thread's getrusage).
	ClientCPU time.Duration
	// ServerMeasured says whether the server's processes could be read
	// (/proc of a server on this machine) and every backend of the run was
	// still there at the end; if not, ServerCPU and Background are zero.
	ServerMeasured bool
	// ServerCPU is the CPU time of the server backends that served the
	// run's connections (found by their application_name in
	// pg_stat_activity, read from /proc/<pid>/schedstat, or stat).
	ServerCPU time.Duration
	// ServerBackends is how many of those backends used 10 ms of CPU or
	// more: each one warms its own caches and plans.
	ServerBackends int
	// Background is the CPU time, meanwhile, of the server's processes
	// that are not client backends: postmaster, walwriter, checkpointer,
	// background writer, autovacuum. They serve every database of the
	// server, so on a shared server this counts others' work too.
	Background time.Duration
	// Statements is how many statements the run's connections sent
	// (counted by a pgx tracer on its pool), and ByStatement the same by
	// name: the leading "-- name:" comment of pgqueue's SQL files, else
	// the statement's first word.
	Statements  int64
	ByStatement []StatementCount
	// Claims, Claimed, Writes and Written are the claims that took jobs
	// and the jobs they took, and the batches of results written and the
	// results they carried (Config.Observer). Zero for the raw run, which
	// counts its claims and completions itself.
	Claims, Claimed, Writes, Written int64
	// ServerStatements is what each statement cost the server, by
	// pg_stat_statements (Config.StatStatements); nil without it.
	ServerStatements []ServerStatement
}

// StatementCount is how often one statement ran in a run, and for how long
// in all (client side: from sending it to its result read).
type StatementCount struct {
	Name  string
	Count int64
	Total time.Duration
}

// perJob is d per job in µs.
func perJob(d time.Duration, jobs int64) float64 {
	if jobs <= 0 {
		return 0
	}
	return float64(d.Nanoseconds()) / 1e3 / float64(jobs)
}

func avg(n, d int64) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// describe is the report's line of what the run cost per job.
func (u Usage) describe(jobs int64) string {
	s := fmt.Sprintf("CPU per job: client %.1f µs", perJob(u.ClientCPU, jobs))
	if u.ServerMeasured {
		s += fmt.Sprintf(", server %.1f µs on %d backends (+ %.1f µs background)", perJob(u.ServerCPU, jobs), u.ServerBackends, perJob(u.Background, jobs))
	} else {
		s += ", server not measured (its processes are not readable here)"
	}
	s += fmt.Sprintf("; statements per job %.4f", avg(u.Statements, jobs))
	if u.Claims > 0 || u.Writes > 0 {
		s += fmt.Sprintf("; claim batch %.0f, write batch %.0f", avg(u.Claimed, u.Claims), avg(u.Written, u.Writes))
	}
	return s
}

// StatementsLine lists the run's statements by count, with their mean
// time.
func (u Usage) StatementsLine() string {
	var parts []string
	for _, s := range u.ByStatement {
		parts = append(parts, fmt.Sprintf("%s %d (%.2f ms)", s.Name, s.Count, float64(s.Total.Microseconds())/1e3/float64(max(s.Count, 1))))
	}
	return "statements: " + strings.Join(parts, ", ")
}

// add sums u and v, as the child processes' usages are summed.
func (u Usage) add(v Usage) Usage {
	u.ClientCPU += v.ClientCPU
	u.Statements += v.Statements
	u.Claims += v.Claims
	u.Claimed += v.Claimed
	u.Writes += v.Writes
	u.Written += v.Written
	u.ByStatement = mergeStatements(u.ByStatement, v.ByStatement)
	return u
}

func mergeStatements(a, b []StatementCount) []StatementCount {
	m := map[string]StatementCount{}
	for _, s := range append(append([]StatementCount(nil), a...), b...) {
		t := m[s.Name]
		t.Name, t.Count, t.Total = s.Name, t.Count+s.Count, t.Total+s.Total
		m[s.Name] = t
	}
	out := make([]StatementCount, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// statementTracer counts the statements a pool sends, by name, and times
// them; claims also by the minute of the run (see claimLog).
type statementTracer struct {
	n      atomic.Int64
	mu     sync.Mutex
	byName map[string]*StatementCount
	// claims and claimSeconds log the claims' times by interval and by
	// second of the run; nil for none.
	claims, claimSeconds *claimLog
}

func newStatementTracer() *statementTracer {
	return &statementTracer{byName: map[string]*StatementCount{}}
}

type traceStart struct{}

// statementName names sql by its leading "-- name:" comment, as every file
// of sql/ starts, else by its first word ("other" for a statement that
// starts with another comment).
func statementName(sql string) string {
	sql = strings.TrimSpace(sql)
	if rest, ok := strings.CutPrefix(sql, "-- "); ok {
		if name, _, ok := strings.Cut(rest, ":"); ok && !strings.ContainsAny(name, " \n") {
			return name
		}
		return "other"
	}
	word, _, _ := strings.Cut(sql, " ")
	word, _, _ = strings.Cut(word, "\n")
	return strings.ToLower(word)
}

func (t *statementTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	t.n.Add(1)
	return context.WithValue(ctx, traceStart{}, startedStatement{name: statementName(data.SQL), at: time.Now()})
}

type startedStatement struct {
	name string
	at   time.Time
}

func (t *statementTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	s, ok := ctx.Value(traceStart{}).(startedStatement)
	if !ok {
		return
	}
	now := time.Now()
	t.record(s.name, now.Sub(s.at))
	if s.name == "claim" {
		t.claimed(now, now.Sub(s.at))
	}
}

// claimed logs a claim that ended at at and took d.
func (t *statementTracer) claimed(at time.Time, d time.Duration) {
	if t.claims != nil {
		t.claims.add(at, d)
	}
	if t.claimSeconds != nil {
		t.claimSeconds.add(at, d)
	}
}

func (t *statementTracer) record(name string, d time.Duration) {
	t.mu.Lock()
	c := t.byName[name]
	if c == nil {
		c = &StatementCount{Name: name}
		t.byName[name] = c
	}
	c.Count++
	c.Total += d
	t.mu.Unlock()
}

// batchTrace is a batch on its way: when it was sent and its statements.
type batchTrace struct {
	at    time.Time
	names []string
}

func (t *statementTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, traceStart{}, &batchTrace{at: time.Now()})
}

func (t *statementTracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	t.n.Add(1)
	if b, ok := ctx.Value(traceStart{}).(*batchTrace); ok {
		b.names = append(b.names, statementName(data.SQL))
	}
}

// TraceBatchEnd times the batch's statements: the batch's whole time goes
// to its last statement (a claim, after its claim lock: what the claim
// cost), none to the others.
func (t *statementTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	b, ok := ctx.Value(traceStart{}).(*batchTrace)
	if !ok || len(b.names) == 0 {
		return
	}
	now := time.Now()
	for i, name := range b.names {
		var d time.Duration
		if i == len(b.names)-1 {
			d = now.Sub(b.at)
		}
		t.record(name, d)
		if name == "claim" {
			t.claimed(now, d)
		}
	}
}

func (t *statementTracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	t.n.Add(1)
	return context.WithValue(ctx, traceStart{}, startedStatement{name: "copy", at: time.Now()})
}

func (t *statementTracer) TraceCopyFromEnd(ctx context.Context, c *pgx.Conn, _ pgx.TraceCopyFromEndData) {
	t.TraceQueryEnd(ctx, c, pgx.TraceQueryEndData{})
}

// snapshot returns the counts so far.
func (t *statementTracer) snapshot() (int64, []StatementCount) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]StatementCount, 0, len(t.byName))
	for _, c := range t.byName {
		out = append(out, *c)
	}
	return t.n.Load(), mergeStatements(out, nil)
}

// runSeq numbers the runs of this process, for their application_name.
var runSeq atomic.Int64

// runApp is a fresh application_name for one run's connections: the
// server CPU of the backends carrying it is the run's.
func runApp() string {
	return fmt.Sprintf("pgqueue_bench_%d_%d", os.Getpid(), runSeq.Add(1))
}

// meter measures one run: the process's CPU, its server backends' CPU, the
// statements its pool sent and, through observe, its claims and writes.
type meter struct {
	pool   *pgxpool.Pool
	tracer *statementTracer
	server *serverCPU      // nil: not measuring the server (a child process)
	stats  *statStatements // nil: without Config.StatStatements
	cpu0   time.Duration

	claims, claimed, writes, written atomic.Int64
}

// newMeter opens the run's own pool: a copy of cfg.Pool's config with a
// counting tracer and application_name app, all its connections opened
// before the clock starts. With server, it also samples the server's
// processes, from a connection of its own.
func newMeter(ctx context.Context, cfg *Config, app string, server bool) (*meter, error) {
	pc := cfg.Pool.Config().Copy()
	if cfg.PoolConns > 0 {
		pc.MaxConns = int32(cfg.PoolConns)
	}
	m := &meter{tracer: newStatementTracer()}
	pc.ConnConfig.Tracer = m.tracer
	pc.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	m.pool = pool
	// Open every connection now: a backend's start-up is not the run's.
	conns := make([]*pgxpool.Conn, 0, pc.MaxConns)
	for range pc.MaxConns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	if server {
		if m.server, err = startServerCPU(ctx, cfg, app); err != nil {
			pool.Close()
			return nil, err
		}
		if cfg.StatStatements {
			m.stats = &statStatements{cfg: cfg}
		}
	}
	return m, nil
}

// start marks the start of the timed part: CPU and statements from here.
func (m *meter) start(ctx context.Context) error {
	if m.stats != nil {
		if err := m.stats.reset(ctx); err != nil {
			return err
		}
	}
	m.tracer.mu.Lock()
	m.tracer.byName = map[string]*StatementCount{}
	m.tracer.mu.Unlock()
	m.tracer.n.Store(0)
	if m.server != nil {
		m.server.mark()
	}
	m.cpu0 = processCPU()
	return nil
}

// stop ends the timed part and reports it.
func (m *meter) stop(ctx context.Context) Usage {
	var meterCPU time.Duration
	if m.server != nil {
		meterCPU = m.server.ownCPU() // ends the sampling: read samples once more
	}
	u := Usage{ClientCPU: processCPU() - m.cpu0 - meterCPU}
	u.Statements, u.ByStatement = m.tracer.snapshot()
	u.Claims, u.Claimed, u.Writes, u.Written = m.claims.Load(), m.claimed.Load(), m.writes.Load(), m.written.Load()
	if m.server != nil {
		u.ServerMeasured, u.ServerCPU, u.Background = m.server.read(ctx)
		u.ServerBackends = m.server.backends()
	}
	if m.stats != nil {
		// A report without them says so (nil); the run's figures stand.
		u.ServerStatements, _ = m.stats.read(ctx)
	}
	return u
}

// close closes the run's pool and the server sampler's connection.
func (m *meter) close() {
	if m.server != nil {
		m.server.close()
	}
	m.pool.Close()
}

// observe has pc's Observer (the one Instrument set, if any) also count
// claims and written batches into m.
func (m *meter) observe(pc *pgqueue.Config) {
	var o pgqueue.Observer
	if pc.Observer != nil {
		o = *pc.Observer
	}
	claimed, written := o.Claimed, o.BatchWritten
	o.Claimed = func(queue string, jobs int) {
		m.claims.Add(1)
		m.claimed.Add(int64(jobs))
		if claimed != nil {
			claimed(queue, jobs)
		}
	}
	o.BatchWritten = func(jobs int) {
		m.writes.Add(1)
		m.written.Add(int64(jobs))
		if written != nil {
			written(jobs)
		}
	}
	pc.Observer = &o
}
