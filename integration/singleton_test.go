//go:build unix

package integration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

// The lock scenarios run integration/lockworker processes against a
// database of their own on the shared test server, inject faults (SIGKILL,
// SIGSTOP past the lease, pg_terminate_backend, a term replaced in the
// database) and check in SQL afterwards that the locks kept their promise.
// Each prints one summary line.

// lockAppPrefix is the application_name prefix of every lockworker session.
const lockAppPrefix = "lockworker-"

// lockSpanArgs matches lockworker's SpanArgs.
type lockSpanArgs struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

func (lockSpanArgs) Kind() string { return "span" }

// lockEnv is one lock scenario's database and processes.
type lockEnv struct {
	t     *testing.T
	url   string
	db    *pgxpool.Pool
	bin   string
	start time.Time

	mu    sync.Mutex
	procs []*lockProc
}

// newLockEnv creates the scenario's database (migrated, from the template)
// and runs setup in it.
func newLockEnv(t *testing.T, setup string) *lockEnv {
	t.Helper()
	e := &lockEnv{t: t, url: pgtest.DB().NewDatabase(t), bin: buildBinary(t, "github.com/pgqueue/pgqueue/integration/lockworker")}
	cfg, err := pgxpool.ParseConfig(e.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	cfg.ConnConfig.RuntimeParams["application_name"] = "locktest"
	if e.db, err = pgxpool.NewWithConfig(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.db.Close) // before the database is dropped, after the processes are killed
	if _, err := e.db.Exec(t.Context(), setup); err != nil {
		t.Fatal(err)
	}
	return e
}

// startProcs starts lockworkers named 1..n with args and waits until all
// are ready.
func (e *lockEnv) startProcs(n int, args ...string) []*lockProc {
	e.t.Helper()
	procs := make([]*lockProc, n)
	for i := range procs {
		procs[i] = e.startProc(fmt.Sprint(i+1), args...)
	}
	for _, p := range procs {
		p.waitReady(e.t)
	}
	return procs
}

func (e *lockEnv) startProc(name string, args ...string) *lockProc {
	e.t.Helper()
	logPath := filepath.Join(e.t.TempDir(), "lockworker-"+name+".log")
	// Killed whatever happens, before the pool and the database go.
	w := startWorkerProc(e.t, "lockworker", name, e.bin, logPath, append([]string{"-db", e.url, "-name", name}, args...)...)
	p := &lockProc{workerProc: w, app: lockAppPrefix + name}
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p
}

// stopAll stops every process still running with SIGTERM (after SIGCONT)
// and fails the test if one does not exit cleanly.
func (e *lockEnv) stopAll() {
	e.t.Helper()
	e.mu.Lock()
	procs := slices.Clone(e.procs)
	e.mu.Unlock()
	ws := make([]*workerProc, len(procs))
	for i, p := range procs {
		ws[i] = p.workerProc
	}
	for i, err := range stopProcs(ws, 20*time.Second) {
		if err != nil {
			e.t.Errorf("%v\n%s", err, procs[i].logTail())
		}
	}
}

// waitUntil polls cond every 50ms until it holds; it fails the test after
// timeout.
func (e *lockEnv) waitUntil(what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	e.t.Helper()
	pollUntil(e.t, what, timeout, cond, e.logTails)
}

func (e *lockEnv) logTails() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b strings.Builder
	for _, p := range e.procs {
		b.WriteString(p.logTail())
	}
	return b.String()
}

// int64Of runs a query of one integer.
func (e *lockEnv) int64Of(query string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.db.QueryRow(e.t.Context(), query, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// lines runs a query of one text column.
func (e *lockEnv) lines(query string, args ...any) []string {
	e.t.Helper()
	rows, err := e.db.Query(e.t.Context(), query, args...)
	if err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	return out
}

// lockCheck is a query whose rows, if any, are violations.
type lockCheck struct {
	name  string
	query string
}

// verify runs the checks and fails the test with every violation found.
func (e *lockEnv) verify(checks []lockCheck) {
	e.t.Helper()
	var violations []string
	for _, c := range checks {
		rows := e.lines(c.query)
		if len(rows) > 0 {
			violations = append(violations, fmt.Sprintf("%s: %d violations, e.g.\n    %s", c.name, len(rows), strings.Join(rows[:min(len(rows), 5)], "\n    ")))
		}
	}
	if len(violations) > 0 {
		e.t.Errorf("violations:\n  %s", strings.Join(violations, "\n  "))
	}
}

// terminateOne ends one backend of the scenario's lockworkers but spare,
// preferring those that hold an advisory lock or are in a transaction, and
// reports whether it found one.
func (e *lockEnv) terminateOne(ctx context.Context, spare *lockProc) bool {
	var ok bool
	// Each termination is recorded (the session checks leave out the runs
	// of a process that lost a session meanwhile).
	err := e.db.QueryRow(ctx, `
		WITH victim AS (
			SELECT a.pid, a.application_name FROM pg_stat_activity a
			WHERE a.datname = current_database() AND a.application_name LIKE $1 AND a.application_name <> $2
			  AND a.pid <> pg_backend_pid()
			ORDER BY EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted) DESC,
			         a.state = 'idle in transaction' DESC, random()
			LIMIT 1
		), ended AS (
			INSERT INTO terminations (app) SELECT application_name FROM victim WHERE pg_terminate_backend(pid)
			RETURNING 1
		)
		SELECT count(*) > 0 FROM ended`, lockAppPrefix+"%", spare.app).Scan(&ok)
	return err == nil && ok
}

// lockProc is a running lockworker.
type lockProc struct {
	*workerProc
	app string // its application_name, client ID and holder name
}

// singletonSchema is what the span workers write: one span per run that
// committed, and the runs the database refused.
const singletonSchema = `
-- terminations: the lockworkers' sessions the test ended, when.
CREATE TABLE terminations (
    app text        NOT NULL,
    at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- attempts: every session-mode run, written in autocommit at its start
-- and end (see lockworker).
CREATE TABLE attempts (
    id         bigserial   PRIMARY KEY,
    job_id     bigint      NOT NULL,
    key        text        NOT NULL,
    worker     text        NOT NULL,
    lock_fence bigint      NOT NULL,
    started    timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended      timestamptz,
    lock_lost  boolean     NOT NULL DEFAULT false
);
CREATE TABLE spans (
    id         bigserial PRIMARY KEY,
    job_id     bigint      NOT NULL,
    key        text        NOT NULL,
    worker     text        NOT NULL,
    lock_fence bigint      NOT NULL,
    started    timestamptz NOT NULL,
    ended      timestamptz NOT NULL
);
CREATE TABLE refusals (
    id         bigserial PRIMARY KEY,
    job_id     bigint NOT NULL,
    key        text   NOT NULL,
    worker     text   NOT NULL,
    lock_fence bigint NOT NULL,
    reason     text   NOT NULL,
    error      text,
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
);
`

// sessionChecks must hold in session mode too: the lock itself, fences
// aside, keeps the runs of a key apart. Runs that may have lost their lock
// are left out: those of a process one of whose sessions the test ended
// from a second before the run to its end (the lock's connection may
// have been it), those whose client saw the lock lost, and those of the
// killed process (never ended).
var sessionChecks = []lockCheck{
	{"session mode: no two runs of one key overlap while both held the lock", `
		WITH sure AS (
			SELECT * FROM attempts r
			WHERE r.ended IS NOT NULL AND NOT r.lock_lost
			  AND NOT EXISTS (SELECT 1 FROM terminations x WHERE x.app = r.worker
			                  AND x.at BETWEEN r.started - interval '1 second' AND r.ended))
		SELECT format('key %s: job %s by %s [%s, %s] fence %s overlaps job %s by %s [%s, %s] fence %s',
		              a.key, a.job_id, a.worker, a.started, a.ended, a.lock_fence, b.job_id, b.worker, b.started, b.ended, b.lock_fence)
		FROM sure a JOIN sure b ON a.key = b.key AND a.id < b.id
		WHERE tstzrange(a.started, a.ended, '[]') && tstzrange(b.started, b.ended, '[]')
		ORDER BY a.id`},
	{"session mode: enough runs are sure of their lock to check", `
		SELECT format('only %s of %s runs ended with their lock surely held', count(*) FILTER (WHERE sure), count(*))
		FROM (SELECT r.ended IS NOT NULL AND NOT r.lock_lost AND NOT EXISTS (SELECT 1 FROM terminations x WHERE x.app = r.worker
		             AND x.at BETWEEN r.started - interval '1 second' AND r.ended) AS sure FROM attempts r) s
		HAVING count(*) FILTER (WHERE sure) < count(*) / 4`},
}

// singletonChecks must hold once every job completed.
var singletonChecks = []lockCheck{
	{"no job lost: every job completed", `
		SELECT format('job %s: %s, attempt %s, errors %s', id, state, attempt, errors)
		FROM pgqueue.jobs WHERE state <> 'completed' ORDER BY id`},
	{"each completed job has exactly one committed span", `
		SELECT format('job %s: %s spans', j.id, count(s.id))
		FROM pgqueue.jobs j LEFT JOIN spans s ON s.job_id = j.id
		GROUP BY j.id HAVING count(s.id) <> 1 ORDER BY j.id`},
	{"no two committed spans of one key overlap", `
		SELECT format('key %s: job %s by %s [%s, %s] fence %s overlaps job %s by %s [%s, %s] fence %s',
		              a.key, a.job_id, a.worker, a.started, a.ended, a.lock_fence, b.job_id, b.worker, b.started, b.ended, b.lock_fence)
		FROM spans a JOIN spans b ON a.key = b.key AND a.id < b.id
		WHERE tstzrange(a.started, a.ended, '[]') && tstzrange(b.started, b.ended, '[]')
		ORDER BY a.id`},
	{"each key's spans, in time order, hold increasing lock fences", `
		SELECT format('key %s: span of job %s fence %s at %s after fence %s', key, job_id, lock_fence, started, prev)
		FROM (SELECT *, lag(lock_fence) OVER (PARTITION BY key ORDER BY started) AS prev FROM spans) s
		WHERE lock_fence <= prev`},
}

// TestSingletonProcesses runs singleton jobs in eight processes, in each
// mode, through a killed process, a process paused past its lease and
// terminated backends, and checks that no two runs of one key overlapped
// and no job was lost.
func TestSingletonProcesses(t *testing.T) {
	skipInShortMode(t, "runs 8 worker processes per lock mode through a kill, a pause and terminated backends for about 20 s")
	pgtest.NeedConns(t, 64, "8 lockworker processes")
	for _, mode := range []string{"xact", "session"} {
		t.Run(mode, func(t *testing.T) { runSingletonScenario(t, mode) })
	}
}

func runSingletonScenario(t *testing.T, mode string) {
	const (
		procs = 8
		keys  = 5
		lease = 2 * time.Second
		pause = 5 * time.Second
		// When the faults strike, from the start of the run.
		killAt = time.Second
		stopAt = 1500 * time.Millisecond
	)
	e := newLockEnv(t, singletonSchema)
	ps := e.startProcs(procs, "-mode", mode, "-lease", lease.String(), "-workers", "3",
		"-work-min", "10ms", "-work-max", "30ms", "-retry-delay", "100ms")

	client, err := pgqueue.New(e.db, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Jobs go in in batches, a few hundred in all: enough that some are
	// always waiting until the paused process is back.
	var jobs atomic.Int64
	enqueue := func(ctx context.Context, n int) error {
		params := make([]pgqueue.EnqueueManyParams, n)
		for i := range params {
			key := fmt.Sprintf("key%d", (int(jobs.Load())+i)%keys)
			params[i] = pgqueue.EnqueueManyParams{Args: lockSpanArgs{Key: key, N: int(jobs.Load()) + i}, Opts: &pgqueue.EnqueueOpts{SingletonKey: key}}
		}
		if _, err := client.EnqueueMany(ctx, params); err != nil {
			return err
		}
		jobs.Add(int64(n))
		return nil
	}
	if err := enqueue(t.Context(), 150); err != nil {
		t.Fatal(err)
	}
	e.start = time.Now()

	// Faults, while the jobs run: backends terminated every 250ms, one
	// process killed, another paused while it holds a lock, for longer
	// than the lease.
	var terminated, pendingAtResume atomic.Int64
	var resumed atomic.Bool
	var heldAtStop string
	faultsCtx, stopFaults := context.WithCancel(t.Context())
	faultErrs := make(chan error, 2)
	killed, paused := ps[0], ps[1]
	go func() {
		faultErrs <- func() error {
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			kill := time.After(time.Until(e.start.Add(killAt)))
			for {
				select {
				case <-faultsCtx.Done():
					return nil
				case <-kill:
					if err := killed.signal(syscall.SIGKILL); err != nil {
						return err
					}
				case <-tick.C:
					// The paused process's sessions are spared: what
					// becomes of its locks is the pause's doing alone.
					if e.terminateOne(faultsCtx, paused) {
						terminated.Add(1)
					}
					if !resumed.Load() {
						n, err := e.pending(faultsCtx)
						if err != nil {
							return err
						}
						if n < 40 {
							if err := enqueue(faultsCtx, 30); err != nil {
								return err
							}
						}
					}
				}
			}
		}()
	}()
	go func() {
		faultErrs <- func() error {
			defer resumed.Store(true)
			select {
			case <-faultsCtx.Done():
				return nil
			case <-time.After(time.Until(e.start.Add(stopAt))):
			}
			held, err := e.stopWhileHolding(faultsCtx, paused)
			if err != nil {
				return err
			}
			heldAtStop = held
			select {
			case <-faultsCtx.Done():
			case <-time.After(pause):
			}
			if err := paused.signal(syscall.SIGCONT); err != nil {
				return err
			}
			n, err := e.pending(faultsCtx)
			pendingAtResume.Store(n)
			return err
		}()
	}()

	// A bound for a stuck run, not a speed check: the run's elapsed time
	// is in its summary line.
	e.waitUntil("every job completed", 3*time.Minute, func(ctx context.Context) (bool, error) {
		n, err := e.pending(ctx)
		// Go on a second past the resume: the paused process's stale work
		// comes back then.
		return n == 0 && resumed.Load() && time.Since(e.start) > stopAt+pause+time.Second, err
	})
	elapsed := time.Since(e.start)
	stopFaults()
	for range 2 {
		if err := <-faultErrs; err != nil {
			t.Fatalf("injecting faults: %v", err)
		}
	}
	e.stopAll()

	e.verify(singletonChecks)
	if mode == "session" {
		e.verify(sessionChecks)
	}

	var maxConcurrent int64
	if n := e.int64Of(`SELECT count(*) FROM spans`); n > 0 {
		maxConcurrent = e.int64Of(`
			SELECT max(c) FROM (
				SELECT count(*) AS c FROM spans a JOIN spans b
				ON a.key = b.key AND b.started <= a.started AND b.ended >= a.started
				GROUP BY a.id) x`)
	}
	if maxConcurrent != 1 {
		t.Errorf("max concurrent runs per key %d, want 1", maxConcurrent)
	}
	// In xact mode a paused holder's session ends once it idles in its
	// transaction for the lease (idle_in_transaction_session_timeout), so
	// its key does not wait for the whole pause. A session lock's
	// connection stays up while its process is paused: there the key
	// waits, and the fences alone keep the resumed holder's writes out.
	maxGap := time.Duration(e.int64Of(`
		SELECT coalesce(max(extract(epoch FROM started - prev) * 1000), 0)::bigint FROM (
			SELECT started, lag(ended) OVER (PARTITION BY key ORDER BY started) AS prev FROM spans) s`)) * time.Millisecond
	if mode == "xact" && maxGap > pause-time.Second {
		t.Errorf("a key waited %s between two runs, though a paused holder's transaction ends after the %s lease", maxGap, lease)
	}
	if pendingAtResume.Load() == 0 {
		t.Errorf("every job was done before the paused process resumed: the run was too short to test that")
	}
	reasons := e.lines(`SELECT reason || '=' || count(*) FROM refusals GROUP BY reason ORDER BY reason`)
	line := fmt.Sprintf("SINGLETON %-7s jobs=%d keys=%d procs=%d completed=%d spans=%d | faults: sigkill=1 sigstop=1 (%s holding %s, lease %s, %d jobs pending at resume) backends_terminated=%d | max_concurrent_per_key=%d longest_key_wait=%s retried_jobs=%d lease_expired=%d refusals[%s] elapsed=%s",
		mode, jobs.Load(), keys, procs,
		e.int64Of(`SELECT count(*) FROM pgqueue.jobs WHERE state = 'completed'`),
		e.int64Of(`SELECT count(*) FROM spans`),
		pause, heldAtStop, lease, pendingAtResume.Load(), terminated.Load(), maxConcurrent, maxGap,
		e.int64Of(`SELECT count(*) FROM pgqueue.jobs WHERE attempt > 1`),
		e.int64Of(`SELECT count(*) FROM pgqueue.jobs WHERE errors::text LIKE '%lease expired%'`),
		strings.Join(reasons, " "), elapsed.Round(100*time.Millisecond))
	t.Log(line)
	fmt.Println(line)
}

// pending counts the jobs not completed yet.
func (e *lockEnv) pending(ctx context.Context) (int64, error) {
	var n int64
	err := e.db.QueryRow(ctx, `SELECT count(*) FROM pgqueue.jobs WHERE state <> 'completed'`).Scan(&n)
	return n, err
}

// stopWhileHolding stops p with SIGSTOP at a moment it holds an advisory
// lock and says how many it held. Never catching one is an error: the
// paused-holder case would go untested. The jobs keep coming until the
// pause ends, so p does hold locks again and again; on a loaded machine
// its runs are rarer and shorter against the sampling, hence the long
// bound (it failed at 3 s, 1 in 6 runs under load).
func (e *lockEnv) stopWhileHolding(ctx context.Context, p *lockProc) (string, error) {
	const tryFor = 30 * time.Second
	deadline := time.Now().Add(tryFor)
	for {
		if err := p.signal(syscall.SIGSTOP); err != nil {
			return "", err
		}
		// Let a statement sent just before the stop (a commit, an unlock)
		// take effect, so that a lock seen now stays held.
		time.Sleep(100 * time.Millisecond)
		var n int64
		if err := e.db.QueryRow(ctx, `
			SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = $1 AND a.datname = current_database()`,
			p.app).Scan(&n); err != nil {
			return "", err
		}
		if n > 0 {
			return fmt.Sprintf("%d locks", n), nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s never caught holding an advisory lock in %s", p.app, tryFor)
		}
		if err := p.signal(syscall.SIGCONT); err != nil {
			return "", err
		}
		time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
	}
}
