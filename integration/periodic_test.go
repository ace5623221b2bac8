//go:build unix

package integration_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/pgtest"
)

// The periodic scenario runs integration/periodicworker processes that all
// carry the same periodic job, kills the maintenance leader with SIGKILL
// twice, and checks in SQL that each instant of the window was enqueued
// exactly once, by the leader of the moment, with no long gap.

// periodicAppPrefix is the application_name prefix of every
// periodicworker session; the rest is its name.
const periodicAppPrefix = "periodicworker-"

// periodicSchema audits every run a periodic job enqueues: the session
// that inserted it and the maintenance lease as that session saw it.
const periodicSchema = `
CREATE TABLE periodic_inserts (
    job_id      bigint      NOT NULL,
    name        text        NOT NULL,
    instant     timestamptz NOT NULL,
    run         text        NOT NULL,
    app         text        NOT NULL DEFAULT current_setting('application_name'),
    holder      text,
    lease_fence bigint,
    at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION audit_periodic() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO periodic_inserts (job_id, name, instant, run, holder, lease_fence)
    SELECT NEW.id, NEW.meta->'periodic'->>'name', (NEW.meta->'periodic'->>'instant')::timestamptz,
           NEW.meta->'periodic'->>'run', l.holder, l.fence
    FROM (VALUES (1)) AS one (x)
    LEFT JOIN pgqueue.leases l ON l.name = 'pgqueue:maintenance';
    RETURN NULL;
END
$$;
CREATE TRIGGER audit_periodic AFTER INSERT ON pgqueue.jobs
    FOR EACH ROW WHEN (NEW.meta ? 'periodic') EXECUTE FUNCTION audit_periodic();
`

// periodicEnv is the periodic scenario's database and processes.
type periodicEnv struct {
	t   *testing.T
	url string
	db  *pgxpool.Pool
	bin string

	mu    sync.Mutex
	procs map[string]*workerProc // by application_name
	order []*workerProc
}

func newPeriodicEnv(t *testing.T) *periodicEnv {
	t.Helper()
	e := &periodicEnv{t: t, url: pgtest.DB().NewDatabase(t), procs: map[string]*workerProc{},
		bin: buildBinary(t, "github.com/pgqueue/pgqueue/integration/periodicworker")}
	cfg, err := pgxpool.ParseConfig(e.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	cfg.ConnConfig.RuntimeParams["application_name"] = "periodictest"
	if e.db, err = pgxpool.NewWithConfig(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.db.Close) // before the database is dropped, after the processes are killed
	if _, err := e.db.Exec(t.Context(), periodicSchema); err != nil {
		t.Fatal(err)
	}
	return e
}

// start starts a periodicworker called name with args and waits until it
// is ready.
func (e *periodicEnv) start(name string, args ...string) *workerProc {
	e.t.Helper()
	logPath := filepath.Join(e.t.TempDir(), "periodicworker-"+name+".log")
	p := startWorkerProc(e.t, "periodicworker", name, e.bin, logPath, append([]string{"-db", e.url, "-name", name}, args...)...)
	e.mu.Lock()
	e.procs[periodicAppPrefix+name] = p
	e.order = append(e.order, p)
	e.mu.Unlock()
	p.waitReady(e.t)
	return p
}

func (e *periodicEnv) logTails() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b strings.Builder
	for _, p := range e.order {
		b.WriteString(p.logTail())
	}
	return b.String()
}

// leaderOf waits until a term above after enqueued a run, and returns its
// holder's process and the term.
func (e *periodicEnv) leaderOf(after int64) (*workerProc, int64) {
	e.t.Helper()
	var holder string
	var term int64
	pollUntil(e.t, fmt.Sprintf("a leader of a term above %d enqueues", after), 20*time.Second, func(ctx context.Context) (bool, error) {
		err := e.db.QueryRow(ctx, `
			SELECT lease_fence, app FROM periodic_inserts WHERE lease_fence > $1
			ORDER BY lease_fence DESC LIMIT 1`, after).Scan(&term, &holder)
		if err == pgx.ErrNoRows {
			return false, nil
		}
		return err == nil, err
	}, e.logTails)
	e.mu.Lock()
	p := e.procs[holder]
	e.mu.Unlock()
	if p == nil {
		e.t.Fatalf("term %d enqueued by %q, not one of the periodicworkers", term, holder)
	}
	return p, term
}

// dbNow returns the database's time.
func (e *periodicEnv) dbNow() time.Time {
	e.t.Helper()
	var now time.Time
	if err := e.db.QueryRow(e.t.Context(), `SELECT now()`).Scan(&now); err != nil {
		e.t.Fatal(err)
	}
	return now
}

func (e *periodicEnv) lines(query string, args ...any) []string {
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

// TestPeriodicProcesses runs three processes with the same periodic job
// every second, kills the leader with SIGKILL twice during the window (two
// minutes; skipped with -short) and starts a fresh process after each
// kill, then checks that every instant of the window was enqueued exactly
// once, each by the leader of the moment, and that no two runs were
// enqueued further apart than the leader TTL plus one period (and the
// follower's poll interval, in which it notices the lease is free).
func TestPeriodicProcesses(t *testing.T) {
	t.Parallel()
	const (
		procs  = 3
		ttl    = 2 * time.Second
		period = time.Second
		job    = "tick"
		poll   = 50 * time.Millisecond
	)
	skipInShortMode(t, "runs 3 periodicworker processes for 2 min, killing the leader twice")
	window := 2 * time.Minute
	args := []string{"-job", job, "-period", period.String(), "-lease", ttl.String(), "-poll", poll.String()}
	e := newPeriodicEnv(t)
	began := time.Now()
	for i := range procs {
		e.start(fmt.Sprint(i+1), args...)
	}
	_, term := e.leaderOf(0)

	from := e.dbNow()
	startedAt := time.Now()
	var failovers []time.Duration
	for i, frac := range []float64{1.0 / 3, 2.0 / 3} {
		time.Sleep(time.Until(startedAt.Add(time.Duration(frac * float64(window)))))
		var victim *workerProc
		victim, term = e.leaderOf(term - 1) // the current term
		if err := victim.signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		// A supervisor would start another one.
		e.start(fmt.Sprint(procs+i+1), args...)
		_, term = e.leaderOf(term)
		failovers = append(failovers, time.Since(killed))
	}
	time.Sleep(time.Until(startedAt.Add(window)))
	to := e.dbNow()
	// The window's last instant lands before the processes stop.
	pollUntil(t, "the window's last instant is enqueued", 10*time.Second, func(ctx context.Context) (bool, error) {
		var ok bool
		err := e.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM periodic_inserts WHERE name = $1 AND instant >= date_trunc('second', $2::timestamptz))`, job, to).Scan(&ok)
		return ok, err
	}, e.logTails)

	e.mu.Lock()
	all := slices.Clone(e.order)
	e.mu.Unlock()
	for i, err := range stopProcs(all, 20*time.Second) {
		if err != nil {
			t.Errorf("%v\n%s", err, all[i].logTail())
		}
	}

	// The window's instants: every whole second in (from, to].
	const inWindow = `instant > $2 AND instant <= date_trunc('second', $3::timestamptz)`
	checks := []struct {
		name, query string
		window      bool // takes from and to as $2 and $3
	}{
		{"no instant is enqueued twice", `
			SELECT format('instant %s enqueued %s times: jobs %s', instant, count(*), string_agg(job_id::text, ', '))
			FROM periodic_inserts WHERE name = $1 AND run = 'scheduled'
			GROUP BY instant HAVING count(*) > 1 ORDER BY instant`, false},
		{"every instant of the window is enqueued", `
			SELECT format('instant %s never enqueued', s)
			FROM generate_series(date_trunc('second', $2::timestamptz) + interval '1 second', date_trunc('second', $3::timestamptz), interval '1 second') s
			WHERE NOT EXISTS (SELECT 1 FROM periodic_inserts WHERE name = $1 AND instant = s)
			ORDER BY s`, true},
		{"every run is a scheduled instant, enqueued once due", `
			SELECT format('job %s: %s run for %s enqueued at %s', job_id, run, instant, at)
			FROM periodic_inserts
			WHERE name = $1 AND (run <> 'scheduled' OR instant <> date_trunc('second', instant) OR at < instant)
			ORDER BY at`, false},
		{"every run is enqueued by the leader of the moment", `
			SELECT format('job %s (instant %s) enqueued by %s while %s held the lease (term %s)', job_id, instant, app, holder, lease_fence)
			FROM periodic_inserts WHERE name = $1 AND app IS DISTINCT FROM holder
			ORDER BY at`, false},
	}
	var violations []string
	for _, c := range checks {
		args := []any{job}
		if c.window {
			args = append(args, from, to)
		}
		if rows := e.lines(c.query, args...); len(rows) > 0 {
			violations = append(violations, fmt.Sprintf("%s: %d violations, e.g.\n    %s", c.name, len(rows), strings.Join(rows[:min(len(rows), 5)], "\n    ")))
		}
	}
	if len(violations) > 0 {
		t.Errorf("violations:\n  %s", strings.Join(violations, "\n  "))
	}

	// The longest time without an enqueue, by the database clock.
	var maxGap time.Duration
	var gapAfter, gapBefore time.Time
	var instants, terms int64
	err := e.db.QueryRow(t.Context(), `
		SELECT coalesce(max(gap), interval '0'), (SELECT count(*) FROM periodic_inserts WHERE name = $1 AND `+inWindow+`),
		       (SELECT count(DISTINCT lease_fence) FROM periodic_inserts WHERE name = $1 AND `+inWindow+`)
		FROM (SELECT at - lag(at) OVER (ORDER BY at) AS gap FROM periodic_inserts WHERE name = $1 AND `+inWindow+`) g`,
		job, from, to).Scan(&maxGap, &instants, &terms)
	if err != nil {
		t.Fatal(err)
	}
	_ = e.db.QueryRow(t.Context(), `
		SELECT prev, at FROM (SELECT at, lag(at) OVER (ORDER BY at) AS prev FROM periodic_inserts WHERE name = $1 AND `+inWindow+`) g
		ORDER BY at - prev DESC NULLS LAST LIMIT 1`, job, from, to).Scan(&gapAfter, &gapBefore)
	// The killed leader's lease runs out up to TTL after the kill, the
	// next leader sees it free within its poll interval and enqueues the
	// instants due meanwhile at once; its last run was up to one period
	// before the kill. So the bound is TTL + period + poll, and a few
	// statements.
	if bound := ttl + period + poll + 250*time.Millisecond; maxGap > bound {
		t.Errorf("no run was enqueued for %s (from %s to %s), longer than the leader TTL plus one period and a poll (%s)", maxGap, gapAfter, gapBefore, bound)
	}
	if terms < 3 {
		t.Errorf("runs of %d terms, want at least 3 (two kills)", terms)
	}
	line := fmt.Sprintf("PERIODIC procs=%d ttl=%s period=%s window=%s | faults: sigkill=2 (failovers %s) | instants=%d terms=%d max_gap=%s violations=%d elapsed=%s",
		procs, ttl, period, to.Sub(from).Round(time.Second), roundAll(failovers), instants, terms, maxGap.Round(time.Millisecond), len(violations),
		time.Since(began).Round(100*time.Millisecond))
	t.Log(line)
	fmt.Println(line)
}

func roundAll(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.Round(10 * time.Millisecond).String()
	}
	return strings.Join(s, " ")
}
