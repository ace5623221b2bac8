package integration_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/pglock"
)

// leaderSchema is what the leaders write, and a log of every change to
// the lease row with the session that made it and the session that held
// the election's session lock (pglock.ElectorConfig.SessionFailover) at
// that moment, whose key the test writes into election_lock.
const leaderSchema = `
CREATE TABLE election_lock (
    classid bigint NOT NULL,
    objid   bigint NOT NULL
);
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
    lock_app    text,
    query       text        NOT NULL DEFAULT regexp_replace(current_query(), '\s+', ' ', 'g'),
    pid         int         NOT NULL DEFAULT pg_backend_pid(),
    xid         bigint      NOT NULL DEFAULT txid_current(),
    at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION log_lease() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    lock_app text := (
        SELECT string_agg(a.application_name, ',')
        FROM pg_locks l JOIN pg_stat_activity a USING (pid) JOIN election_lock k ON l.classid::bigint = k.classid AND l.objid::bigint = k.objid
        WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()));
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO lease_log (op, app, new_holder, new_fence, new_expires, tx_now, lock_app)
        VALUES (TG_OP, current_setting('application_name'), NEW.holder, NEW.fence, NEW.expires_at, now(), lock_app);
    ELSE
        INSERT INTO lease_log (op, app, old_holder, old_fence, old_expires, new_holder, new_fence, new_expires, tx_now, lock_app)
        VALUES (TG_OP, current_setting('application_name'), OLD.holder, OLD.fence, OLD.expires_at,
                NEW.holder, NEW.fence, NEW.expires_at, now(), lock_app);
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
	{"a candidate takes the lease over before it expired only while its session holds the election's lock (no leader's session is alive)", `
		SELECT format('%s took fence %s over from %s (fence %s) at %s, before its expiry %s, while %s held the session lock', app, new_fence, old_holder, old_fence, tx_now, old_expires, coalesce(lock_app, 'no one'))
		FROM lease_log WHERE op = 'UPDATE' AND new_fence <> old_fence AND app LIKE 'lockworker-%' AND old_expires > tx_now
		  AND lock_app IS DISTINCT FROM app ORDER BY id`},
}

// TestLeaderProcesses runs four processes that campaign for one lease and
// act while leading, kills the leader, pauses the next one past its lease,
// replaces a term in the database, and checks that the terms' acts never
// interleaved and that no stale leader changed the lease. The electors
// hold the leadership also as a session lock: the killed leader's session
// ends with it, and a follower takes over before its lease expires; the
// paused one's session lives on, and the lease's expiry replaces it.
func TestLeaderProcesses(t *testing.T) {
	skipInShortMode(t, "runs 4 electing processes through a kill and a pause for about 10 s")
	const (
		procs = 4
		ttl   = 2 * time.Second
		pause = 5 * time.Second
	)
	e := newLockEnv(t, leaderSchema)
	e.recordElectionLock()
	ps := e.startProcs(procs, "-mode", "leader", "-ttl", ttl.String(), "-renew", "500ms",
		"-retry", "200ms", "-margin", "500ms", "-act", "50ms", "-session-failover", "-session-interval", "50ms")
	e.start = time.Now()
	byApp := map[string]*lockProc{}
	for _, p := range ps {
		byApp[p.app] = p
	}

	// 1. A leader acts. Kill it: its session ends with it, and another
	// takes over before its lease ends.
	first, term1 := e.waitActingLeader(byApp, 0)
	e.waitSessionBacked(term1)
	if err := first.signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	killedAt := e.dbClock()
	second, term2 := e.waitActingLeader(byApp, term1)
	killFailover := time.Since(killed)
	kill := e.takeoverFrom(term1, killedAt)
	if !kill.beforeExpiry || !kill.byLockHolder {
		t.Errorf("after the leader of term %d was killed, the lease was taken over %s, want before its expiry by the holder of the session lock", term1, kill)
	}

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
	if stuck := e.takeoverFrom(term2, time.Time{}); stuck.beforeExpiry {
		t.Errorf("the paused leader of term %d, whose session lives, was taken over %s, want only once its lease expired", term2, stuck)
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
	line := fmt.Sprintf("LEADER procs=%d ttl=%s terms_acting=%d acts=%d | faults: sigkill=1 (failover %s: takeover %s, first act %s after the kill, %s before the lease's expiry) sigstop=1 (%s, failover %s) term_replaced=1 | stale_acts_refused=%d interleavings=%d unfenced_acts=%d stale_lease_changes=%d lease_changes=%d elapsed=%s",
		procs, ttl, terms, e.int64Of(`SELECT count(*) FROM acts`),
		killFailover.Round(10*time.Millisecond), kill.afterKill.Round(time.Millisecond), kill.firstAct.Round(time.Millisecond), kill.leftOnLease.Round(time.Millisecond),
		pause, pauseFailover.Round(10*time.Millisecond),
		e.int64Of(`SELECT count(*) FROM refused_acts`),
		e.int64Of(`SELECT count(*) FROM (SELECT term, lag(term) OVER (ORDER BY at, id) AS prev FROM acts) a WHERE term < prev`),
		e.int64Of(`SELECT count(*) FROM acts WHERE lease_fence <> term`),
		e.int64Of(`SELECT count(*) FROM lease_log WHERE op = 'UPDATE' AND new_fence = old_fence AND app <> old_holder`),
		e.int64Of(`SELECT count(*) FROM lease_log`),
		elapsed.Round(100*time.Millisecond))
	t.Log(line)
	fmt.Println(line)
}

// recordElectionLock writes the key of the "leader" election's session
// lock into election_lock, for lease_log to name its holder.
func (e *lockEnv) recordElectionLock() {
	e.t.Helper()
	lk, err := pglock.New(e.db, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	el, err := lk.NewElector("leader", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	k := el.SessionKey()
	if _, err := e.db.Exec(e.t.Context(), `INSERT INTO election_lock VALUES ($1, $2)`, int64(uint32(k.Class)), int64(uint32(k.Object))); err != nil {
		e.t.Fatal(err)
	}
}

// waitSessionBacked waits until the elector recorded term as held by a
// session too (under the fence resource pglock:elector:leader): a term
// that began on the lease alone, its session lock busy for a moment, is
// taken over only once expired until then.
func (e *lockEnv) waitSessionBacked(term int64) {
	e.t.Helper()
	e.waitUntil(fmt.Sprintf("term %d is held by a session too", term), 10*time.Second, func(ctx context.Context) (bool, error) {
		var token int64
		err := e.db.QueryRow(ctx, `SELECT token FROM pgqueue.fences WHERE resource = 'pglock:elector:leader'`).Scan(&token)
		if err == pgx.ErrNoRows {
			return false, nil
		}
		return token == term, err
	})
}

// dbClock returns the database's clock_timestamp().
func (e *lockEnv) dbClock() time.Time {
	e.t.Helper()
	var now time.Time
	if err := e.db.QueryRow(e.t.Context(), `SELECT clock_timestamp()`).Scan(&now); err != nil {
		e.t.Fatal(err)
	}
	return now
}

// takeover is how a term's lease passed to the next term, from lease_log.
type takeover struct {
	term, next   int64
	holder       string
	beforeExpiry bool // while the old term's lease was valid
	byLockHolder bool // by the process whose session held the election's lock
	// By the database clock: from the kill (if given) to the takeover's
	// transaction and to the next term's first act, and what was left of
	// the old lease.
	afterKill, firstAct, leftOnLease time.Duration
}

func (k takeover) String() string {
	return fmt.Sprintf("from term %d to %d by %s (before expiry %t, by the lock holder %t, %s after the kill, first act %s after it, %s left on the lease)",
		k.term, k.next, k.holder, k.beforeExpiry, k.byLockHolder, k.afterKill, k.firstAct, k.leftOnLease)
}

// takeoverFrom reads the change of the lease from term to another; the
// durations after the kill are zero when killedAt is.
func (e *lockEnv) takeoverFrom(term int64, killedAt time.Time) takeover {
	e.t.Helper()
	k := takeover{term: term}
	var at, expires time.Time
	var firstAct *time.Time
	err := e.db.QueryRow(e.t.Context(), `
		SELECT new_fence, app, old_expires > tx_now, coalesce(lock_app = app, false), tx_now, old_expires,
		       (SELECT min(a.at) FROM acts a WHERE a.term = l.new_fence)
		FROM lease_log l WHERE op = 'UPDATE' AND old_fence = $1 AND new_fence <> old_fence
		ORDER BY id LIMIT 1`, term).Scan(&k.next, &k.holder, &k.beforeExpiry, &k.byLockHolder, &at, &expires, &firstAct)
	if err != nil {
		e.t.Fatalf("the takeover of term %d: %v", term, err)
	}
	if k.beforeExpiry {
		k.leftOnLease = expires.Sub(at)
	}
	if !killedAt.IsZero() {
		k.afterKill = at.Sub(killedAt)
		if firstAct != nil {
			k.firstAct = firstAct.Sub(killedAt)
		}
	}
	return k
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
	skipInShortMode(t, "a lease holder process paused past its TTL")
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

var (
	failoverRounds = flag.Int("failover-rounds", 2, "TestLeaderKillFailover: leaders killed in each mode")
	failoverTTL    = flag.Duration("failover-ttl", 2*time.Second, "TestLeaderKillFailover: the leaders' lease TTL")
)

// TestLeaderKillFailover kills the leader of three processes again and
// again (a fresh process replaces each), with the lease alone and with
// SessionFailover, and prints how long after each SIGKILL, by the database
// clock, the lease was taken over and the new term first acted. With the
// session every takeover must come before the killed leader's lease
// expired, by the holder of the election's lock; with the lease alone,
// only after it expired. The figures of docs/dev/fault-suite.md:
//
//	go test -count=1 -run 'TestLeaderKillFailover$' -v ./integration -args -failover-rounds=5 -failover-ttl=10s
func TestLeaderKillFailover(t *testing.T) {
	skipInShortMode(t, "a leader process killed and failed over, in lease and session mode")
	ttl, rounds := *failoverTTL, *failoverRounds
	for _, mode := range []string{"lease", "session"} {
		t.Run(mode, func(t *testing.T) {
			e := newLockEnv(t, leaderSchema)
			e.recordElectionLock()
			args := []string{"-mode", "leader", "-ttl", ttl.String(), "-renew", (ttl / 4).String(),
				"-retry", "200ms", "-margin", (ttl / 4).String(), "-act", "50ms"}
			if mode == "session" {
				args = append(args, "-session-failover")
			}
			ps := e.startProcs(3, args...)
			byApp := map[string]*lockProc{}
			for _, p := range ps {
				byApp[p.app] = p
			}
			var takeovers, firstActs []time.Duration
			_, term := e.waitActingLeader(byApp, 0)
			for i := range rounds {
				leader := byApp[e.lines(`SELECT holder FROM acts WHERE term = $1 LIMIT 1`, term)[0]]
				if mode == "session" {
					e.waitSessionBacked(term)
				}
				if err := leader.signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killedAt := e.dbClock()
				p := e.startProc(fmt.Sprint(4+i), args...)
				byApp[p.app] = p
				_, next := e.waitActingLeader(byApp, term)
				k := e.takeoverFrom(term, killedAt)
				if mode == "session" && (!k.beforeExpiry || !k.byLockHolder) {
					t.Errorf("kill %d: taken over %s, want before its expiry by the holder of the session lock", i+1, k)
				}
				if mode == "lease" && k.beforeExpiry {
					t.Errorf("kill %d: taken over %s, want only once its lease expired", i+1, k)
				}
				takeovers, firstActs = append(takeovers, k.afterKill), append(firstActs, k.firstAct)
				term = next
			}
			e.stopAll()
			e.verify(leaderChecks)
			line := fmt.Sprintf("FAILOVER mode=%s ttl=%s kills=%d | after SIGKILL: takeover median %s (%s), first act median %s (%s)",
				mode, ttl, rounds, median(takeovers).Round(time.Millisecond), roundAllMs(takeovers),
				median(firstActs).Round(time.Millisecond), roundAllMs(firstActs))
			t.Log(line)
			fmt.Println(line)
		})
	}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func roundAllMs(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.Round(time.Millisecond).String()
	}
	return strings.Join(s, " ")
}
