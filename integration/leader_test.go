package integration_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// leaderSchema is what the leaders write, and a log of every change to
// the lease row with the session that made it.
const leaderSchema = `
CREATE TABLE acts (
    id          bigserial   PRIMARY KEY,
    term        bigint      NOT NULL,
    holder      text        NOT NULL,
    lease_fence bigint      NOT NULL,
    at          timestamptz NOT NULL
);
CREATE TABLE refused_acts (
    id     bigserial   PRIMARY KEY,
    term   bigint      NOT NULL,
    holder text        NOT NULL,
    error  text,
    at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE lease_log (
    id          bigserial   PRIMARY KEY,
    op          text        NOT NULL,
    app         text        NOT NULL,
    old_holder  text,
    old_fence   bigint,
    old_expires timestamptz,
    new_holder  text        NOT NULL,
    new_fence   bigint      NOT NULL,
    new_expires timestamptz NOT NULL,
    tx_now      timestamptz NOT NULL,
    query       text        NOT NULL DEFAULT regexp_replace(current_query(), '\s+', ' ', 'g'),
    pid         int         NOT NULL DEFAULT pg_backend_pid(),
    xid         bigint      NOT NULL DEFAULT txid_current(),
    at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION log_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO lease_log (op, app, new_holder, new_fence, new_expires, tx_now)
        VALUES (TG_OP, current_setting('application_name'), NEW.holder, NEW.fence, NEW.expires_at, now());
    ELSE
        INSERT INTO lease_log (op, app, old_holder, old_fence, old_expires, new_holder, new_fence, new_expires, tx_now)
        VALUES (TG_OP, current_setting('application_name'), OLD.holder, OLD.fence, OLD.expires_at,
                NEW.holder, NEW.fence, NEW.expires_at, now());
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER log_lease AFTER INSERT OR UPDATE ON pgqueue.leases
    FOR EACH ROW WHEN (NEW.name = 'leader') EXECUTE FUNCTION log_lease();
`

// leaderChecks must hold after any run of the leader scenario.
var leaderChecks = []lockCheck{
	{"acts of different terms never interleave: in time order the term never decreases", `
		SELECT format('act %s of term %s by %s at %s follows an act of term %s by %s', id, term, holder, at, prev_term, prev_holder)
		FROM (SELECT *, lag(term) OVER w AS prev_term, lag(holder) OVER w AS prev_holder FROM acts WINDOW w AS (ORDER BY at, id)) a
		WHERE term < prev_term ORDER BY id`},
	{"every act is fenced by its term: the lease's fence, read in the act's transaction before its fence check, was the term", `
		SELECT format('act %s of term %s by %s at %s: lease fence %s', id, term, holder, at, lease_fence)
		FROM acts WHERE lease_fence <> term ORDER BY id`},
	{"each term acts for the holder the lease named with that fence", `
		SELECT format('term %s: acts by %s, lease given to %s', a.term, a.holders, coalesce(l.holders, '(never)'))
		FROM (SELECT term, string_agg(DISTINCT holder, ',') AS holders FROM acts GROUP BY term) a
		LEFT JOIN (SELECT new_fence, string_agg(DISTINCT new_holder, ',') AS holders FROM lease_log GROUP BY new_fence) l ON l.new_fence = a.term
		WHERE l.holders IS DISTINCT FROM a.holders ORDER BY a.term`},
	{"only a term's holder renews or resigns it: a stale term's renewal or resign changes nothing", `
		SELECT format('lease row of %s (fence %s, expiring %s) changed to expire %s by %s at %s', old_holder, old_fence, old_expires, new_expires, app, at)
		FROM lease_log WHERE op = 'UPDATE' AND new_fence = old_fence AND app <> old_holder ORDER BY id`},
	{"the lease's fence only grows", `
		SELECT format('fence %s replaced by %s by %s at %s', old_fence, new_fence, app, at)
		FROM lease_log WHERE op = 'UPDATE' AND new_fence < old_fence ORDER BY id`},
	{"a candidate takes the lease over only once it expired", `
		SELECT format('%s took fence %s over from %s (fence %s) at %s, before its expiry %s', app, new_fence, old_holder, old_fence, tx_now, old_expires)
		FROM lease_log WHERE op = 'UPDATE' AND new_fence <> old_fence AND app LIKE 'lockworker-%' AND old_expires > tx_now ORDER BY id`},
}

// TestLeaderProcesses runs four processes that campaign for one lease and
// act while leading, kills the leader, pauses the next one past its lease,
// replaces a term in the database, and checks that the terms' acts never
// interleaved and that no stale leader changed the lease.
func TestLeaderProcesses(t *testing.T) {
	const (
		procs = 4
		ttl   = 2 * time.Second
		pause = 5 * time.Second
	)
	e := newLockEnv(t, leaderSchema)
	ps := e.startProcs(procs, "-mode", "leader", "-ttl", ttl.String(), "-renew", "500ms",
		"-retry", "200ms", "-margin", "500ms", "-act", "50ms")
	e.start = time.Now()
	byApp := map[string]*lockProc{}
	for _, p := range ps {
		byApp[p.app] = p
	}

	// 1. A leader acts. Kill it: another takes over once its lease ends.
	first, term1 := e.waitActingLeader(byApp, 0)
	if err := first.signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	second, term2 := e.waitActingLeader(byApp, term1)
	killFailover := time.Since(killed)

	// 2. Pause the new leader past its lease: a third takes over; the
	// paused one, once resumed, finds its term over and stops.
	if err := second.signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	third, term3 := e.waitActingLeader(byApp, term2)
	pauseFailover := time.Since(stopped)
	if pauseFailover > pause {
		t.Fatalf("no new leader acted during the %s pause", pause)
	}
	time.Sleep(time.Until(stopped.Add(pause)))
	if err := second.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	second.waitLine(t, fmt.Sprintf("end term=%d", term2), 5*time.Second, true)

	// 3. Replace the third leader's term in the database, as an intruder
	// that claims the term's fence in the same transaction. The old
	// leader's next act is refused; it steps down and resigns a term that
	// is no longer its own, which must change nothing.
	intruder := e.replaceLeaderTerm(ttl)
	third.waitLine(t, fmt.Sprintf("end term=%d", term3), 5*time.Second, true)
	_, term4 := e.waitActingLeader(byApp, intruder)
	time.Sleep(300 * time.Millisecond)
	elapsed := time.Since(e.start)

	// 4. Everyone stops; the leader resigns.
	e.stopAll()

	e.verify(leaderChecks)
	if n := e.int64Of(`SELECT count(*) FROM lease_log WHERE new_fence = $1 OR old_fence = $1`, intruder); n != 2 {
		// The intruder's own update, and the takeover after its expiry.
		t.Errorf("the intruder's term %d appears in %d lease changes, want 2: %v", intruder, n,
			e.lines(`SELECT format('%s by %s: %s/%s -> %s/%s expiring %s', op, app, old_holder, old_fence, new_holder, new_fence, new_expires) FROM lease_log WHERE new_fence = $1 OR old_fence = $1 ORDER BY id`, intruder))
	}
	terms := e.int64Of(`SELECT count(DISTINCT term) FROM acts`)
	if terms < 4 {
		t.Errorf("acts of %d terms, want at least 4 (%d, %d, %d, %d)", terms, term1, term2, term3, term4)
	}
	if t.Failed() {
		// What each process saw, and every change of the lease with the
		// statement, session and transaction that made it.
		for _, p := range ps {
			p.mu.Lock()
			t.Logf("%s printed %q", p.app, p.stdout)
			p.mu.Unlock()
		}
		t.Logf("terms %d %d %d, intruder %d, then %d", term1, term2, term3, intruder, term4)
		for _, l := range e.lines(`
			SELECT format('%s %s by %s (pid %s, xid %s): %s/%s/%s -> %s/%s/%s: %s', at::time, op, app, pid, xid,
			              old_holder, old_fence, old_expires::time, new_holder, new_fence, new_expires::time, left(query, 100))
			FROM lease_log ORDER BY id`) {
			t.Log(l)
		}
	}
	line := fmt.Sprintf("LEADER procs=%d ttl=%s terms_acting=%d acts=%d | faults: sigkill=1 (failover %s) sigstop=1 (%s, failover %s) term_replaced=1 | stale_acts_refused=%d interleavings=%d unfenced_acts=%d stale_lease_changes=%d lease_changes=%d elapsed=%s",
		procs, ttl, terms, e.int64Of(`SELECT count(*) FROM acts`),
		killFailover.Round(10*time.Millisecond), pause, pauseFailover.Round(10*time.Millisecond),
		e.int64Of(`SELECT count(*) FROM refused_acts`),
		e.int64Of(`SELECT count(*) FROM (SELECT term, lag(term) OVER (ORDER BY at, id) AS prev FROM acts) a WHERE term < prev`),
		e.int64Of(`SELECT count(*) FROM acts WHERE lease_fence <> term`),
		e.int64Of(`SELECT count(*) FROM lease_log WHERE op = 'UPDATE' AND new_fence = old_fence AND app <> old_holder`),
		e.int64Of(`SELECT count(*) FROM lease_log`),
		elapsed.Round(100*time.Millisecond))
	t.Log(line)
	fmt.Println(line)
}

// waitActingLeader waits until a term above after has acted a few times and
// returns its holder's process and the term.
func (e *lockEnv) waitActingLeader(byApp map[string]*lockProc, after int64) (*lockProc, int64) {
	e.t.Helper()
	var holder string
	var term int64
	e.waitUntil(fmt.Sprintf("a leader with a term above %d acts", after), 15*time.Second, func(ctx context.Context) (bool, error) {
		err := e.db.QueryRow(ctx, `
			SELECT term, holder FROM acts WHERE term > $1
			GROUP BY term, holder HAVING count(*) >= 3
			ORDER BY term DESC LIMIT 1`, after).Scan(&term, &holder)
		if err == pgx.ErrNoRows {
			return false, nil
		}
		return err == nil, err
	})
	p := byApp[holder]
	if p == nil {
		e.t.Fatalf("term %d acted by %q, not one of the lockworkers", term, holder)
	}
	return p, term
}

// replaceLeaderTerm gives the lease a new term held by "intruder" for ttl
// and records that term's fence, in one transaction, and returns the term.
func (e *lockEnv) replaceLeaderTerm(ttl time.Duration) int64 {
	e.t.Helper()
	var fence int64
	err := pgx.BeginFunc(e.t.Context(), e.db, func(tx pgx.Tx) error {
		err := tx.QueryRow(e.t.Context(), `
			UPDATE pgqueue.leases
			SET fence = nextval('pgqueue.fence_seq'), holder = 'intruder', expires_at = now() + $1::bigint * interval '1 millisecond'
			WHERE name = 'leader'
			RETURNING fence`, ttl.Milliseconds()).Scan(&fence)
		if err != nil {
			return err
		}
		_, err = tx.Exec(e.t.Context(), `SELECT pgqueue.check_fence('leader', $1)`, fence)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return fence
}

// TestLeaseStaleRenewal pauses a process holding the lease past its TTL,
// lets another take it over and keep it, then resumes the first, which
// renews at once with its old fence without looking at the clock: the
// database must refuse that renewal, leaving the new holder's lease as it
// was.
func TestLeaseStaleRenewal(t *testing.T) {
	const ttl = 2 * time.Second
	e := newLockEnv(t, leaderSchema)
	args := []string{"-mode", "lease", "-ttl", ttl.String(), "-renew", "300ms"}
	stale := e.startProc("1", args...)
	stale.waitReady(t)
	stale.waitLine(t, "hold term=", 10*time.Second, true)
	term1 := termOf(t, stale, "hold term=")
	if err := stale.signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	holder := e.startProc("2", args...)
	holder.waitReady(t)
	holder.waitLine(t, "hold term=", 10*time.Second, true)
	term2 := termOf(t, holder, "hold term=")
	holder.waitLine(t, fmt.Sprintf("renewed term=%d", term2), 5*time.Second, false)
	if err := stale.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Its first renewal after the pause is refused.
	stale.waitLine(t, fmt.Sprintf("lost term=%d", term1), 5*time.Second, false)
	e.stopAll()

	if n := e.int64Of(`SELECT count(*) FROM lease_log WHERE op = 'UPDATE' AND app = $1 AND old_fence = $2`, stale.app, term2); n != 0 {
		t.Errorf("the resumed holder of term %d changed term %d's lease %d times: %v", term1, term2, n,
			e.lines(`SELECT format('%s by %s: %s/%s -> %s/%s expiring %s -> %s', op, app, old_holder, old_fence, new_holder, new_fence, old_expires, new_expires) FROM lease_log WHERE app = $1 AND old_fence = $2 ORDER BY id`, stale.app, term2))
	}
	e.verify(leaderChecks)
}

// termOf returns the term of the first line p printed with prefix.
func termOf(t *testing.T, p *lockProc, prefix string) int64 {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.stdout {
		if strings.HasPrefix(l, prefix) {
			var term int64
			if _, err := fmt.Sscanf(strings.TrimPrefix(l, prefix), "%d", &term); err != nil {
				t.Fatalf("%s: %q: %v", p.app, l, err)
			}
			return term
		}
	}
	t.Fatalf("%s printed no %q line", p.app, prefix)
	return 0
}
