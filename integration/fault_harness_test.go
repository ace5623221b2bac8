//go:build unix

package integration_test

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/integration/proxy"
	"github.com/pgqueue/pgqueue/internal/pgserver"
)

// The fault scenarios share one shape: a private server, a few worker
// processes (integration/faultworker) working "effect" jobs, one kind of
// fault injected while they run, then the invariants (faultInvariants)
// checked in SQL once every job is final. The workers ignore their
// context's cancellation in their own writes (faultworker -zombie), so
// fencing alone must keep a stale holder's writes out.

const (
	faultLease     = 2 * time.Second
	faultRescue    = 500 * time.Millisecond
	faultDBName    = "faults"
	faultAppPrefix = "faultworker-" // application_name prefix of the workers' sessions

	// Reasons the worker records in refusals (see faultworker): the first
	// two are stale writes the database refused; the third is a commit whose
	// outcome the worker could not learn.
	faultReasonStaleFence = "stale-fence"
	faultReasonLeaseLost  = "lease-lost"
	faultReasonCommit     = "commit-unknown"
)

// faultEffectArgs matches faultworker's EffectArgs.
type faultEffectArgs struct {
	N    int    `json:"n"`
	Mode string `json:"mode,omitempty"`
}

func (faultEffectArgs) Kind() string { return "effect" }

// faultJobs is how many jobs a scenario runs.
func faultJobs() int { return 2000 }

// faultSchema is created in every scenario's database after the migrations:
// what the workers write, and an audit of every fence a job was given.
const faultSchema = `
CREATE TABLE effects (
    id     bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    fence  bigint NOT NULL,
    worker text   NOT NULL,
    at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX effects_job_idx ON effects (job_id);

CREATE TABLE refusals (
    id     bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    fence  bigint NOT NULL,
    worker text   NOT NULL,
    reason text   NOT NULL,
    error  text,
    at     timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- claims records every fence a job is given (claim or rescue), in the
-- transaction that gives it, with the server's boot time to tell the fences
-- handed out before a restart from those after.
CREATE TABLE claims (
    seq    bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    fence  bigint,
    state  text NOT NULL,
    boot   timestamptz NOT NULL DEFAULT pg_postmaster_start_time(),
    at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX claims_job_idx ON claims (job_id, seq);

CREATE FUNCTION audit_fence() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO claims (job_id, fence, state) VALUES (NEW.id, NEW.fence, NEW.state);
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_fence_audit
    AFTER UPDATE OF fence ON pgqueue.jobs
    FOR EACH ROW WHEN (NEW.fence IS DISTINCT FROM OLD.fence)
    EXECUTE FUNCTION audit_fence();

-- foreign_writes records every change to a running job that keeps its
-- fence (a heartbeat, a result, a completion) made by a session other than
-- its holder's: a stale write that got through, whatever the statement.
-- Claims and rescues give a new fence and are not counted.
CREATE TABLE foreign_writes (
    id        bigserial PRIMARY KEY,
    job_id    bigint NOT NULL,
    fence     bigint,
    holder    text,
    writer    text,
    old_state text,
    new_state text,
    old_lease timestamptz,
    new_lease timestamptz,
    at        timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE FUNCTION audit_foreign_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO foreign_writes (job_id, fence, holder, writer, old_state, new_state, old_lease, new_lease)
    VALUES (OLD.id, OLD.fence, OLD.worker_id, current_setting('application_name'), OLD.state, NEW.state, OLD.lease_until, NEW.lease_until);
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_foreign_write
    AFTER UPDATE ON pgqueue.jobs
    FOR EACH ROW WHEN (OLD.state = 'running' AND NEW.fence IS NOT DISTINCT FROM OLD.fence
                       AND current_setting('application_name') IS DISTINCT FROM '` + faultAppPrefix + `' || OLD.worker_id)
    EXECUTE FUNCTION audit_foreign_write();

-- What faultworker -victim and -hold read and write (see faultworker).
CREATE TABLE steps (
    id     bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    fence  bigint NOT NULL,
    worker text   NOT NULL,
    step   text   NOT NULL,
    at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE gates (name text PRIMARY KEY);
CREATE TABLE holds (
    job_id   bigint PRIMARY KEY,
    fence    bigint NOT NULL,
    released boolean NOT NULL DEFAULT false
);
`

// faultEnv is one scenario's world.
type faultEnv struct {
	t      *testing.T
	server *pgserver.Server
	// direct connects to the scenario's database straight to the server:
	// the checks always go this way, whatever the workers go through.
	direct string
	db     *pgxpool.Pool
	jobs   int
	bin    string
	// start is when the jobs were enqueued; setup is how long getting there
	// took, stopping how long the graceful stop of the workers took.
	start           time.Time
	setup, stopping time.Duration
	// elapsed is how long the jobs took to be final, from start.
	elapsed time.Duration

	mu      sync.Mutex
	workers []*workerProc
}

// newFaultEnv starts a private server with synchronous commits (a commit
// acknowledged before a crash must survive it, or a fence could be handed
// out twice), creates and migrates a database, and enqueues the jobs.
func newFaultEnv(t *testing.T, jobs int) *faultEnv {
	t.Helper()
	return newFaultEnvSettings(t, jobs, nil)
}

// newFaultEnvSettings is newFaultEnv with more server settings.
func newFaultEnvSettings(t *testing.T, jobs int, settings map[string]string) *faultEnv {
	t.Helper()
	skipInShortMode(t, "runs 4 faultworker processes through a fault for 5-20 s")
	began := time.Now()
	bin := buildBinary(t, "github.com/pgqueue/pgqueue/integration/faultworker")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	all := map[string]string{"synchronous_commit": "on"}
	maps.Copy(all, settings)
	server, err := pgserver.Start(ctx, pgserver.Options{Settings: all})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := server.Close(); err != nil {
			t.Error(err)
		}
	})
	admin, err := pgx.Connect(ctx, server.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.Exec(ctx, "CREATE DATABASE "+faultDBName)
	_ = admin.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}

	e := &faultEnv{t: t, server: server, direct: server.ConnString(faultDBName), jobs: jobs, bin: bin}
	cfg, err := pgxpool.ParseConfig(e.direct)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	cfg.ConnConfig.RuntimeParams["application_name"] = "faulttest"
	// Seconds, not fewer: on a loaded machine (other packages' tests beside
	// this one) a new session of the private server took over 2 s to
	// start, and a check of the test's own failed the fault test with it.
	// A server that hangs is found by the waits' own deadlines.
	cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	if e.db, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.db.Close)

	if _, err := pgqueue.Migrate(ctx, e.db, pgqueue.SchemaDefault); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Exec(ctx, faultSchema); err != nil {
		t.Fatal(err)
	}
	client, err := pgqueue.New(e.db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.jobs > 0 {
		params := make([]pgqueue.EnqueueManyParams, e.jobs)
		for i := range params {
			params[i] = pgqueue.EnqueueManyParams{Args: faultEffectArgs{N: i}}
		}
		res, err := client.EnqueueMany(ctx, params)
		if err != nil || res.Enqueued != int64(e.jobs) {
			t.Fatalf("enqueue %d jobs: inserted %+v, %v", e.jobs, res, err)
		}
	}
	e.start = time.Now()
	e.setup = e.start.Sub(began)
	return e
}

// faultWorkerOpts configures one faultworker process.
type faultWorkerOpts struct {
	// db is the URL the worker connects to; default e.direct.
	db string
	// maxWorkers is its concurrency; default 4.
	maxWorkers int
	// sleepMin and sleepMax bound the time a handler waits inside its
	// transaction; default 5ms to 30ms.
	sleepMin, sleepMax time.Duration
	// sleepAt is where in its transaction a handler waits; default
	// after-check (see faultworker's -sleep-at).
	sleepAt string
	// queues are the queues it works; default the default queue.
	queues []string
	// extra are more flags (-victim, -hold, -complete-batch-delay).
	extra []string
}

// startWorkers starts n more workers, named w<k> on from the workers
// already started, and waits until all are ready.
func (e *faultEnv) startWorkers(n int, o faultWorkerOpts) []*workerProc {
	e.t.Helper()
	e.mu.Lock()
	first := len(e.workers) + 1
	e.mu.Unlock()
	out := make([]*workerProc, n)
	for i := range out {
		out[i] = e.startWorker(fmt.Sprintf("w%d", first+i), o)
	}
	for _, w := range out {
		w.waitReady(e.t)
	}
	return out
}

func (e *faultEnv) startWorker(name string, o faultWorkerOpts) *workerProc {
	e.t.Helper()
	args := []string{
		"-db", cmp.Or(o.db, e.direct),
		"-name", name,
		"-lease", faultLease.String(),
		"-rescue", faultRescue.String(),
		"-max-workers", strconv.Itoa(cmp.Or(o.maxWorkers, 4)),
		"-sleep-min", cmp.Or(o.sleepMin, 5*time.Millisecond).String(),
		"-sleep-max", cmp.Or(o.sleepMax, 30*time.Millisecond).String(),
		"-sleep-at", cmp.Or(o.sleepAt, "after-check"),
	}
	if len(o.queues) > 0 {
		args = append(args, "-queues", strings.Join(o.queues, ","))
	}
	args = append(args, o.extra...)
	logDir := e.t.TempDir()
	if dir := os.Getenv("FAULT_LOG_DIR"); dir != "" {
		// Keep the workers' logs after the test, one directory per test.
		logDir = filepath.Join(dir, strings.ReplaceAll(e.t.Name(), "/", "_"))
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			e.t.Fatal(err)
		}
	}
	// Killed whatever happens, before the database pool and the server are
	// closed.
	w := startWorkerProc(e.t, "worker", name, e.bin, filepath.Join(logDir, name+".log"), args...)
	e.mu.Lock()
	e.workers = append(e.workers, w)
	e.mu.Unlock()
	return w
}

// stopWorkers stops every worker still running, gracefully; a worker that
// fails to is a test error (Stop must end once the queue is empty).
func (e *faultEnv) stopWorkers() {
	e.t.Helper()
	e.mu.Lock()
	workers := slices.Clone(e.workers)
	e.mu.Unlock()
	began := time.Now()
	errs := stopProcs(workers, 20*time.Second)
	e.stopping = time.Since(began)
	for i, err := range errs {
		if err != nil {
			e.t.Errorf("graceful stop: %v\n%s", err, workers[i].logTail())
		}
	}
}

// count runs a query returning one integer, straight to the server.
func (e *faultEnv) count(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := e.db.QueryRow(ctx, query, args...).Scan(&n)
	return n, err
}

// mustCount is count that ends the test on error.
func (e *faultEnv) mustCount(query string, args ...any) int64 {
	e.t.Helper()
	n, err := e.count(e.t.Context(), query, args...)
	if err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// finished returns how many jobs are in a final state.
func (e *faultEnv) finished(ctx context.Context) (int64, error) {
	return e.count(ctx, `SELECT count(*) FROM pgqueue.jobs WHERE state IN ('completed', 'discarded', 'cancelled')`)
}

// waitUntil polls cond every 50ms until it holds, tolerating errors (the
// server may be down), and fails the test after timeout.
func (e *faultEnv) waitUntil(what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	e.t.Helper()
	pollUntil(e.t, what, timeout, cond, e.stateDump)
}

// waitProgress waits until at least n jobs are final.
func (e *faultEnv) waitProgress(n int) {
	e.t.Helper()
	e.waitUntil(fmt.Sprintf("%d jobs are final", n), 90*time.Second, func(ctx context.Context) (bool, error) {
		done, err := e.finished(ctx)
		return done >= int64(n), err
	})
}

// waitAllFinal waits until every job is final.
func (e *faultEnv) waitAllFinal() {
	e.t.Helper()
	e.waitProgress(e.jobs)
	e.elapsed = time.Since(e.start)
}

// faultStall is how long a progress wait lets no job become final before
// it fails: such a wait checks that the jobs get done, not how fast, which
// depends on the machine's load and on retry delays.
const faultStall = 30 * time.Second

// waitFinalExcept waits until every job but those in except is final,
// however long that takes while jobs keep becoming final; it fails the
// test, with evidence (stalled's, then where the jobs are), once none has
// for faultStall.
func (e *faultEnv) waitFinalExcept(what string, except []int64, stalled func() string) {
	e.t.Helper()
	began := time.Now()
	want := int64(e.jobs - len(except))
	last, progressed := int64(-1), began
	var lastErr error
	for {
		n, err := e.count(e.t.Context(), `
			SELECT count(*) FROM pgqueue.jobs
			WHERE state IN ('completed', 'discarded', 'cancelled') AND id <> ALL ($1::bigint[])`, except)
		switch {
		case err != nil:
			lastErr = err // the server may be down for a moment: no progress seen
		case n >= want:
			return
		case n > last:
			last, progressed = n, time.Now()
		}
		if time.Since(progressed) > faultStall {
			e.t.Fatalf("waiting until %s: no job became final for %s (%d of %d final after %s; last error: %v)\n%s\n%s",
				what, faultStall, max(last, 0), want, time.Since(began).Round(100*time.Millisecond), lastErr, stalled(), e.stateDump())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stateDump describes where the jobs are, for a timeout.
func (e *faultEnv) stateDump() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	for _, line := range e.evidence(ctx, `
		SELECT format('%s: %s jobs, attempts %s..%s', state, count(*), min(attempt), max(attempt))
		FROM pgqueue.jobs GROUP BY state ORDER BY state`) {
		fmt.Fprintf(&b, "  %s\n", line)
	}
	for _, line := range e.evidence(ctx, `
		SELECT format('job %s: %s, attempt %s, fence %s, lease_until %s (now %s), worker %s, run_at %s', id, state, attempt, fence, lease_until, now(), worker_id, run_at)
		FROM pgqueue.jobs WHERE state NOT IN ('completed', 'discarded', 'cancelled') ORDER BY id LIMIT 10`) {
		fmt.Fprintf(&b, "  %s\n", line)
	}
	e.mu.Lock()
	for _, w := range e.workers {
		b.WriteString(w.logTail())
		b.WriteByte('\n')
	}
	e.mu.Unlock()
	return b.String()
}

// evidence runs a query of one text column and returns its rows (or the
// error as a row).
func (e *faultEnv) evidence(ctx context.Context, query string, args ...any) []string {
	rows, err := e.db.Query(ctx, query, args...)
	if err != nil {
		return []string{fmt.Sprintf("query failed: %v", err)}
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return []string{fmt.Sprintf("query failed: %v", err)}
	}
	return out
}

// lockWaits describes every session waiting on a lock and what holds it.
func (e *faultEnv) lockWaits() []string {
	e.t.Helper()
	return e.evidence(e.t.Context(), `
		SELECT format('%s pid %s (%s) waits %s on %s: %s; blocked by %s', a.application_name, a.pid, a.state,
		              date_trunc('millisecond', now() - a.query_start), a.wait_event_type || '/' || a.wait_event,
		              left(regexp_replace(a.query, '\s+', ' ', 'g'), 160),
		              (SELECT string_agg(format('%s pid %s (%s, in tx for %s): %s', b.application_name, b.pid, b.state,
		                                        date_trunc('millisecond', now() - b.xact_start), left(regexp_replace(b.query, '\s+', ' ', 'g'), 80)), '; ')
		               FROM pg_stat_activity b WHERE b.pid = ANY (pg_blocking_pids(a.pid))))
		FROM pg_stat_activity a WHERE cardinality(pg_blocking_pids(a.pid)) > 0 ORDER BY a.pid`)
}

// faultInvariant is a query whose rows, if any, are violations.
type faultInvariant struct {
	name  string
	query string
}

// faultInvariants must hold after any fault once every job is final.
var faultInvariants = []faultInvariant{
	{"no job lost: every job completed, or discarded with its errors", `
		SELECT format('job %s: state %s, attempt %s/%s, errors %s', id, state, attempt, max_attempts, errors)
		FROM pgqueue.jobs
		WHERE NOT (state = 'completed' OR (state = 'discarded' AND jsonb_array_length(errors) > 0))
		ORDER BY id`},
	{"each completed job has exactly one effect, with the job's final fence", `
		SELECT format('job %s (fence %s): %s effects, fences %s', j.id, j.fence, count(e.id), coalesce(string_agg(e.fence::text || ' by ' || e.worker, ', '), '-'))
		FROM pgqueue.jobs j LEFT JOIN effects e ON e.job_id = j.id
		WHERE j.state = 'completed'
		GROUP BY j.id, j.fence
		HAVING count(e.id) <> 1 OR bool_or(e.fence IS DISTINCT FROM j.fence)
		ORDER BY j.id`},
	{"no job has more than one effect", `
		SELECT format('job %s: %s effects: %s', job_id, count(*), string_agg(fence::text || ' by ' || worker, ', ' ORDER BY id))
		FROM effects GROUP BY job_id HAVING count(*) > 1 ORDER BY job_id`},
	{"no effect carries a stale fence (every effect has its job's final fence and the job completed)", `
		SELECT format('effect %s of job %s: fence %s by %s at %s; job fence %s, state %s', e.id, e.job_id, e.fence, e.worker, e.at, j.fence, j.state)
		FROM effects e LEFT JOIN pgqueue.jobs j ON j.id = e.job_id
		WHERE j.id IS NULL OR e.fence IS DISTINCT FROM j.fence OR j.state <> 'completed'
		ORDER BY e.id`},
	{"no write refused as stale took effect", `
		SELECT format('effect %s of job %s fence %s by %s, yet refused: %s (%s)', e.id, e.job_id, e.fence, e.worker, r.reason, r.error)
		FROM effects e JOIN refusals r ON r.job_id = e.job_id AND r.fence = e.fence
		WHERE r.reason IN ('` + faultReasonStaleFence + `', '` + faultReasonLeaseLost + `')
		ORDER BY e.id`},
	{"no write to a running job came from a session other than its holder's", `
		SELECT format('job %s (fence %s, held by %s): %s -> %s, lease %s -> %s, written by %s at %s', job_id, fence, holder, old_state, new_state, old_lease, new_lease, writer, at)
		FROM foreign_writes ORDER BY id`},
	{"each job's fences grow strictly, in the order they were given", `
		SELECT format('job %s: fence %s (seq %s) given after fence %s', job_id, fence, seq, prev)
		FROM (SELECT seq, job_id, fence, lag(fence) OVER (PARTITION BY job_id ORDER BY seq) AS prev FROM claims) c
		WHERE fence IS NULL OR fence <= prev
		ORDER BY seq`},
	{"no fence is given twice", `
		SELECT format('fence %s given %s times: jobs %s', fence, count(*), string_agg(job_id::text, ', '))
		FROM claims GROUP BY fence HAVING count(*) > 1 ORDER BY fence`},
	{"no two jobs hold the same fence", `
		SELECT format('fence %s held by jobs %s', fence, string_agg(id::text, ', '))
		FROM pgqueue.jobs WHERE fence IS NOT NULL GROUP BY fence HAVING count(*) > 1 ORDER BY fence`},
	{"each job's fence is the last one the audit saw given", `
		SELECT format('job %s: fence %s, last audited %s', j.id, j.fence, c.fence)
		FROM pgqueue.jobs j
		LEFT JOIN LATERAL (SELECT fence FROM claims WHERE job_id = j.id ORDER BY seq DESC LIMIT 1) c ON true
		WHERE j.fence IS DISTINCT FROM c.fence
		ORDER BY j.id`},
}

// faultFigures are what a scenario reports.
type faultFigures struct {
	jobs, completed, discarded, lost  int64
	retried, rescued, staleRefused    int64
	ambiguousCommits, ambiguousLanded int64
	refusalsByReason                  map[string]int64
	claims, maxAttempt                int64
}

// check verifies the invariants, ending the test with every violation
// found, and returns the scenario's figures.
func (e *faultEnv) check() faultFigures {
	e.t.Helper()
	return e.checkWith(faultInvariants)
}

// checkWith is check with invariants in place of faultInvariants.
func (e *faultEnv) checkWith(invariants []faultInvariant) faultFigures {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var violations []string
	total := e.mustCount(`SELECT count(*) FROM pgqueue.jobs`)
	if total != int64(e.jobs) {
		violations = append(violations, fmt.Sprintf("no job lost: %d jobs in the table, %d enqueued", total, e.jobs))
	}
	for _, inv := range invariants {
		rows := e.evidence(ctx, inv.query)
		if len(rows) == 0 {
			continue
		}
		shown := rows[:min(len(rows), 10)]
		violations = append(violations, fmt.Sprintf("%s: %d violations, e.g.\n    %s", inv.name, len(rows), strings.Join(shown, "\n    ")))
	}

	f := faultFigures{jobs: total, refusalsByReason: map[string]int64{}}
	err := e.db.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE state = 'completed'),
		       count(*) FILTER (WHERE state = 'discarded'),
		       count(*) FILTER (WHERE attempt > 1),
		       count(*) FILTER (WHERE errors::text LIKE '%lease expired%'),
		       coalesce(max(attempt), 0)
		FROM pgqueue.jobs`).Scan(&f.completed, &f.discarded, &f.retried, &f.rescued, &f.maxAttempt)
	if err != nil {
		e.t.Fatal(err)
	}
	f.lost = int64(e.jobs) - f.completed - e.mustCount(`SELECT count(*) FROM pgqueue.jobs WHERE state = 'discarded' AND jsonb_array_length(errors) > 0`)
	f.claims = e.mustCount(`SELECT count(*) FROM claims`)
	f.staleRefused = e.mustCount(`SELECT count(*) FROM refusals WHERE reason IN ($1, $2)`, faultReasonStaleFence, faultReasonLeaseLost)
	f.ambiguousCommits = e.mustCount(`SELECT count(*) FROM refusals WHERE reason = $1`, faultReasonCommit)
	f.ambiguousLanded = e.mustCount(`SELECT count(*) FROM refusals r WHERE reason = $1 AND EXISTS (SELECT 1 FROM effects e WHERE e.job_id = r.job_id AND e.fence = r.fence)`, faultReasonCommit)
	rows, err := e.db.Query(ctx, `SELECT reason, count(*) FROM refusals GROUP BY reason`)
	if err != nil {
		e.t.Fatal(err)
	}
	for rows.Next() {
		var reason string
		var n int64
		if err := rows.Scan(&reason, &n); err != nil {
			e.t.Fatal(err)
		}
		f.refusalsByReason[reason] = n
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	if f.lost != 0 {
		violations = append(violations, fmt.Sprintf("jobs lost: %d", f.lost))
	}
	if len(violations) > 0 {
		e.t.Fatalf("invariants violated:\n  %s", strings.Join(violations, "\n  "))
	}
	return f
}

// report prints the scenario's figure line to the test log and stdout.
func (e *faultEnv) report(scenario string, faults int64, what string, f faultFigures, extra string) {
	e.t.Helper()
	reasons := make([]string, 0, len(f.refusalsByReason))
	for _, r := range slices.Sorted(maps.Keys(f.refusalsByReason)) {
		reasons = append(reasons, fmt.Sprintf("%s=%d", r, f.refusalsByReason[r]))
	}
	line := fmt.Sprintf("FAULT %-20s jobs=%d faults=%d (%s) stale_writes_refused=%d jobs_attempt_gt1=%d jobs_lost=%d | completed=%d discarded=%d rescued=%d max_attempt=%d claims=%d ambiguous_commits=%d (landed %d) refusals[%s] elapsed=%s setup=%s stop=%s",
		scenario, f.jobs, faults, what, f.staleRefused, f.retried, f.lost,
		f.completed, f.discarded, f.rescued, f.maxAttempt, f.claims, f.ambiguousCommits, f.ambiguousLanded,
		strings.Join(reasons, " "), e.elapsed.Round(100*time.Millisecond), e.setup.Round(100*time.Millisecond), e.stopping.Round(100*time.Millisecond))
	if extra != "" {
		line += " " + extra
	}
	e.t.Logf("%s", line)
	fmt.Printf("%s\n", line)
}

// runningJobs returns the jobs worker holds as running, by id with their
// fences.
func (e *faultEnv) runningJobs(worker string) map[int64]int64 {
	e.t.Helper()
	rows, err := e.db.Query(e.t.Context(), `SELECT id, fence FROM pgqueue.jobs WHERE state = 'running' AND worker_id = $1`, worker)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[int64]int64{}
	var id, fence int64
	_, err = pgx.ForEachRow(rows, []any{&id, &fence}, func() error {
		out[id] = fence
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// waitVictimBusy waits until worker has written some effects and holds
// running jobs, so a fault hits it mid-job.
func (e *faultEnv) waitVictimBusy(worker string) {
	e.t.Helper()
	minEffects := e.jobs / 40
	e.waitUntil(worker+" is mid-job", 60*time.Second, func(ctx context.Context) (bool, error) {
		n, err := e.count(ctx, `
			SELECT CASE WHEN (SELECT count(*) FROM effects WHERE worker = $1) >= $2
			            THEN (SELECT count(*) FROM pgqueue.jobs WHERE state = 'running' AND worker_id = $1)
			            ELSE 0 END`, worker, minEffects)
		return n > 0, err
	})
}

// freeze stops w with SIGSTOP at a moment it holds running jobs, and
// returns those jobs and when it was stopped. Statements its backends had
// received before still finish, so the jobs are read a moment later; if
// none is left, w is resumed and caught again, a few times.
func (e *faultEnv) freeze(w *workerProc) (held map[int64]int64, stopped time.Time) {
	e.t.Helper()
	for range 5 {
		e.waitVictimBusy(w.name)
		if err := w.signal(syscall.SIGSTOP); err != nil {
			e.t.Fatal(err)
		}
		stopped = time.Now()
		time.Sleep(200 * time.Millisecond)
		if held = e.runningJobs(w.name); len(held) > 0 {
			return held, stopped
		}
		if err := w.signal(syscall.SIGCONT); err != nil {
			e.t.Fatal(err)
		}
	}
	e.t.Fatalf("%s never held a running job when stopped", w.name)
	return nil, time.Time{}
}

// waitSessionsGone waits until no session of worker is left on the server.
func (e *faultEnv) waitSessionsGone(worker string) {
	e.t.Helper()
	e.waitUntil(worker+"'s sessions are gone", 30*time.Second, func(ctx context.Context) (bool, error) {
		n, err := e.count(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, faultAppPrefix+worker)
		return n == 0, err
	})
}

func startFaultProxy(t *testing.T, e *faultEnv) *proxy.Proxy {
	t.Helper()
	p, err := proxy.New(fmt.Sprintf("127.0.0.1:%d", e.server.Port()))
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the workers' kill: runs after it.
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

func faultProxyURL(t *testing.T, p *proxy.Proxy, e *faultEnv) string {
	t.Helper()
	u, err := p.ConnString(e.direct)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// waitUntilFinalOr waits up to d for every job to be final, then calls
// giveUp (which switches the fault off, so that the run can end) if they
// are not.
func (e *faultEnv) waitUntilFinalOr(d time.Duration, giveUp func()) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		done, err := e.finished(e.t.Context())
		if err != nil {
			e.t.Fatal(err)
		}
		if done == int64(e.jobs) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Logf("not done after %s under the fault; switching it off", d)
	giveUp()
}

func faultSplitJobs(jobs map[int64]int64) (ids, fences []int64) {
	for id, fence := range jobs {
		ids = append(ids, id)
		fences = append(fences, fence)
	}
	return ids, fences
}
