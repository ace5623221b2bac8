package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/internal/testlog"
	"github.com/pgqueue/pgqueue/pglock"
)

// sessionElector runs an elector with SessionFailover and records its
// terms; unlike runElector it tolerates a term that overlaps another's
// (a leader that lost its session learns it only at its next check), as
// the fence, not the elector, keeps their writes apart.
type sessionElector struct {
	*pglock.Elector
	holder string
	cancel context.CancelFunc
	done   chan struct{}
	terms  chan term
}

// runSessionElector runs an elector; with oneTerm, its Run ends after its
// first term, so it cannot campaign again.
func runSessionElector(t *testing.T, lk *pglock.Locker, holder string, cfg pglock.ElectorConfig, oneTerm bool) *sessionElector {
	t.Helper()
	cfg.Holder = holder
	cfg.SessionFailover = true
	e, err := lk.NewElector("leader", &cfg)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	se := &sessionElector{Elector: e, holder: holder, cancel: cancel, done: make(chan struct{}), terms: make(chan term, 16)}
	go func() {
		defer close(se.done)
		e.Run(ctx, func(ctx context.Context, n int64) {
			se.terms <- term{holder: holder, term: n}
			<-ctx.Done()
			if oneTerm {
				cancel()
			}
			se.terms <- term{holder: holder, term: n, cause: context.Cause(ctx)}
		})
	}()
	t.Cleanup(se.stop)
	return se
}

func (se *sessionElector) stop() {
	se.cancel()
	<-se.done
}

func (se *sessionElector) next(t *testing.T, within time.Duration) term {
	t.Helper()
	select {
	case tm := <-se.terms:
		return tm
	case <-time.After(within):
		t.Fatalf("%s: no term event within %s", se.holder, within)
		return term{}
	}
}

// leaseTimes is a lease row with the times that tell how it was taken.
type leaseTimes struct {
	Holder     string
	Fence      int64
	AcquiredAt time.Time
	ExpiresAt  time.Time
}

func readLeaseTimes(t *testing.T, pool *pgxpool.Pool) leaseTimes {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT holder, fence, acquired_at, expires_at FROM pgqueue.leases WHERE name = 'leader'")
	must(t, err)
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[leaseTimes])
	must(t, err)
	return r
}

// checkFence runs CheckFenceTx for resource "leader" with token in a
// transaction of its own and commits it.
func checkFence(t *testing.T, pool *pgxpool.Pool, token int64) error {
	t.Helper()
	return pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error {
		return pglock.CheckFenceTx(t.Context(), tx, "pgqueue", "leader", token)
	})
}

// The TTL is long, the session interval short: any takeover before the TTL
// ran out went through the session lock.
var sessionCfg = pglock.ElectorConfig{TTL: 30 * time.Second, RetryInterval: 30 * time.Second, SessionInterval: 50 * time.Millisecond}

func TestElectorSessionFailover(t *testing.T) {
	t.Parallel()

	t.Run("LeaderSessionTerminated", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := newPool(t)
		// Both in one process: b gets the lock once a noticed its session
		// gone (the process-local guard keeps it until then) and
		// resigned, or took it over first; a does not campaign again. A
		// killed leader cannot resign: integration/leader_test.go kills
		// one.
		a := runSessionElector(t, quietLocker(t, pool), "a", sessionCfg, true)
		first := a.next(t, 5*time.Second)
		b := runSessionElector(t, quietLocker(t, pool), "b", sessionCfg, false)
		// The leader holds the election's lock on its session.
		pid := singleHolder(t, pool, a.SessionKey())
		before := readLeaseTimes(t, pool)
		if before.Fence != first.term || before.Holder != "a" {
			t.Fatalf("lease %+v, want a's term %d", before, first.term)
		}
		must(t, checkFence(t, pool, first.term))

		// The leader's session ends; its process lives on.
		var ok bool
		must(t, pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok))
		if !ok {
			t.Fatalf("could not terminate backend %d", pid)
		}
		second := b.next(t, 10*time.Second)
		if second.term <= first.term {
			t.Fatalf("b's term %d after a's %d, want higher", second.term, first.term)
		}
		after := readLeaseTimes(t, pool)
		if after.Holder != "b" || after.Fence != second.term {
			t.Fatalf("lease %+v, want b's term %d", after, second.term)
		}
		// Taken before a's lease ran out by the database clock: the
		// session's end, not the expiry, handed it over.
		if !after.AcquiredAt.Before(before.ExpiresAt) {
			t.Fatalf("b took the lease at %s, not before a's lease expired at %s", after.AcquiredAt, before.ExpiresAt)
		}
		t.Logf("taken over %s before a's lease would have expired", before.ExpiresAt.Sub(after.AcquiredAt).Round(time.Millisecond))

		// a learns that its session ended and ends its term.
		if end := a.next(t, 5*time.Second); end.term != first.term || !errors.Is(end.cause, pglock.ErrLost) {
			t.Fatalf("a's term ended %+v, want term %d lost with ErrLost", end, first.term)
		}
		// The new leader holds the lock on its own session.
		if got := singleHolder(t, pool, b.SessionKey()); got == pid {
			t.Fatalf("the lock is held by a's terminated backend %d", pid)
		}
		// Fencing still refuses the old term once the new one acted, and
		// a's resign of its old term changed nothing.
		must(t, checkFence(t, pool, second.term))
		if err := checkFence(t, pool, first.term); !errors.Is(err, pglock.ErrStaleFence) {
			t.Fatalf("a fenced write of the old term %d: %v, want ErrStaleFence", first.term, err)
		}
		if row := readLeaseTimes(t, pool); row.Holder != "b" || row.Fence != second.term || !row.ExpiresAt.Equal(after.ExpiresAt) && !row.ExpiresAt.After(after.ExpiresAt) {
			t.Fatalf("lease %+v after a's term ended, want b's %+v or renewed by b", row, after)
		}
		select {
		case tm := <-a.terms:
			t.Fatalf("a leads again while b leads: %+v", tm)
		case <-time.After(300 * time.Millisecond):
		}
	})

	t.Run("LeaderNoticesLostSession", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := newPool(t)
		a := runSessionElector(t, quietLocker(t, pool), "a", sessionCfg, false)
		first := a.next(t, 5*time.Second)
		pid := singleHolder(t, pool, a.SessionKey())
		var ok bool
		must(t, pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok))
		// Well before its next renewal (TTL/3 = 10s), by its session check.
		end := a.next(t, 5*time.Second)
		if end.term != first.term || !errors.Is(end.cause, pglock.ErrLost) || !strings.Contains(end.cause.Error(), "session ended") {
			t.Fatalf("term ended %+v, want term %d lost with ErrLost as its session ended", end, first.term)
		}
		// It resigned the term, and leads again on a new session.
		second := a.next(t, 5*time.Second)
		if second.term <= first.term {
			t.Fatalf("term %d after %d, want higher", second.term, first.term)
		}
		if got := singleHolder(t, pool, a.SessionKey()); got == pid {
			t.Fatalf("lock held by the terminated backend %d", pid)
		}
	})

	// relayedElector runs elector "a" whose session goes through a relay
	// that can hold the server's replies back (the lease goes through the
	// pool, straight to the server), and returns the relay, the elector
	// and its first term.
	relayedElector := func(t *testing.T, cfg pglock.ElectorConfig) (*pgxpool.Pool, *relay, *sessionElector, term) {
		t.Helper()
		pool, r, lk := relayedLocker(t, &pglock.Config{Logger: testlog.Discard()})
		a := runSessionElector(t, lk, "a", cfg, false)
		first := a.next(t, 5*time.Second)
		singleHolder(t, pool, a.SessionKey())
		return pool, r, a, first
	}

	// A leader's session check waits SessionTimeout for its answer, beside
	// the renewals: a session that answers late keeps the term, one that
	// does not answer within the timeout ends it.
	t.Run("SlowSessionAnswerKeepsTheTerm", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a leader's session answering late")
		// Renewals every second: the session is silent for two of them.
		cfg := pglock.ElectorConfig{TTL: 3 * time.Second, RetryInterval: 30 * time.Second,
			SessionInterval: 50 * time.Millisecond, SessionTimeout: 20 * time.Second}
		pool, r, a, first := relayedElector(t, cfg)
		before := readLeaseTimes(t, pool)
		r.Pause()
		time.Sleep(2500 * time.Millisecond)
		r.Resume()
		select {
		case tm := <-a.terms:
			t.Fatalf("term event %+v after the session answered late, within SessionTimeout", tm)
		case <-time.After(500 * time.Millisecond):
		}
		// The lease was renewed meanwhile: the late answer held nothing up.
		if after := readLeaseTimes(t, pool); after.Fence != first.term || !after.ExpiresAt.After(before.ExpiresAt.Add(2*time.Second)) {
			t.Fatalf("lease %+v after the pause, want term %d renewed past %s", after, first.term, before.ExpiresAt.Add(2*time.Second))
		}
	})

	t.Run("SessionThatStopsAnsweringEndsTheTerm", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a leader's session that stops answering")
		cfg := sessionCfg
		cfg.SessionTimeout = 300 * time.Millisecond
		_, r, a, first := relayedElector(t, cfg)
		r.Pause()
		// Well before the lease's expiry (TTL 30 s).
		end := a.next(t, 10*time.Second)
		r.Resume()
		if end.term != first.term || !errors.Is(end.cause, pglock.ErrLost) || !strings.Contains(end.cause.Error(), "session ended") {
			t.Fatalf("term ended %+v, want term %d lost with ErrLost as its session ended", end, first.term)
		}
		// Its closed connection ended the session: it leads again on a
		// new one once the server answers.
		if second := a.next(t, 10*time.Second); second.term <= first.term {
			t.Fatalf("term %d after %d, want higher", second.term, first.term)
		}
	})

	t.Run("StuckLeaderWaitsForExpiry", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a stuck session leader's successor waiting for expiry")
		ctx := t.Context()
		pool := newPool(t)
		lk := quietLocker(t, pool)
		probe, err := lk.NewElector("leader", nil)
		must(t, err)
		// A leader that is alive but stuck: its session holds the
		// election's lock, its lease is not renewed.
		stuck, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig)
		must(t, err)
		t.Cleanup(func() { _ = stuck.Close(context.Background()) })
		k := probe.SessionKey()
		_, err = stuck.Exec(ctx, "SELECT pg_advisory_lock($1::int4, $2::int4)", k.Class, k.Object)
		must(t, err)
		held, err := lk.TryLockLease(ctx, "leader", "stuck", 2*time.Second)
		must(t, err)
		before := readLeaseTimes(t, pool)

		cfg := sessionCfg
		cfg.RetryInterval = 100 * time.Millisecond
		b := runSessionElector(t, lk, "b", cfg, false)
		began := b.next(t, 10*time.Second)
		if began.term <= held.Fence() {
			t.Fatalf("b's term %d after %d, want higher", began.term, held.Fence())
		}
		after := readLeaseTimes(t, pool)
		if after.AcquiredAt.Before(before.ExpiresAt) {
			t.Fatalf("b took the lease at %s, before the stuck leader's lease expired at %s", after.AcquiredAt, before.ExpiresAt)
		}
		if err := held.Renew(ctx); !errors.Is(err, pglock.ErrLost) {
			t.Fatalf("the stuck leader's renewal: %v, want ErrLost", err)
		}
		// Once the stuck session lets go, the leader takes the lock too,
		// without a new term.
		if pids := advisoryHolders(t, pool, k, true); len(pids) != 1 || pids[0] != int32(stuck.PgConn().PID()) {
			t.Fatalf("lock holders %v, want only the stuck session %d", pids, stuck.PgConn().PID())
		}
		_, err = stuck.Exec(ctx, "SELECT pg_advisory_unlock($1::int4, $2::int4)", k.Class, k.Object)
		must(t, err)
		waitFor(t, "the leader to take the session lock", func() bool {
			return len(advisoryHolders(t, pool, k, true)) == 1
		})
		if row := readLeaseTimes(t, pool); row.Fence != began.term {
			t.Fatalf("lease %+v, want b's term %d still", row, began.term)
		}
	})

	t.Run("ResignReleasesLock", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		a := runSessionElector(t, quietLocker(t, pool), "a", sessionCfg, false)
		a.next(t, 5*time.Second)
		singleHolder(t, pool, a.SessionKey())
		a.stop()
		if end := a.next(t, time.Second); !errors.Is(end.cause, context.Canceled) {
			t.Fatalf("term ended %+v, want cancelled", end)
		}
		if pids := advisoryHolders(t, pool, a.SessionKey(), true); len(pids) != 0 {
			t.Fatalf("lock still held by %v after Run returned", pids)
		}
		// The resign freed the lease too.
		var free bool
		must(t, pool.QueryRow(t.Context(), "SELECT expires_at <= now() FROM pgqueue.leases WHERE name = 'leader'").Scan(&free))
		if !free {
			t.Fatalf("lease %+v still valid after the resign", readLeaseTimes(t, pool))
		}
	})
}

// Behind a pooler there is no session to hold: an elector with
// SessionFailover says so once, takes no advisory lock, and leads on the
// lease alone.
func TestElectorSessionFailoverBehindPooler(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "session failover behind a pooler")
	direct, err := pgx.ParseConfig(pgtest.DB().NewDatabase(t))
	must(t, err)
	pooler := startRotatingPooler(t, fmt.Sprintf("%s:%d", direct.Host, direct.Port), 0)
	pool := poolThrough(t, direct, pooler)
	var logs testlog.Buffer
	lk := newLocker(t, pool, &pglock.Config{Logger: logs.Logger()})
	cfg := sessionCfg
	cfg.RetryInterval = 100 * time.Millisecond
	a := runSessionElector(t, lk, "a", cfg, false)
	began := a.next(t, 10*time.Second)
	// A few session intervals and campaigns go by.
	time.Sleep(500 * time.Millisecond)
	directPool, err := pgxpool.New(t.Context(), direct.ConnString())
	must(t, err)
	defer directPool.Close()
	if pids := advisoryHolders(t, directPool, a.SessionKey(), true); len(pids) != 0 {
		t.Fatalf("advisory lock held by %v through the pooler", pids)
	}
	if row := readLeaseTimes(t, directPool); row.Fence != began.term || row.Holder != "a" {
		t.Fatalf("lease %+v, want a's term %d", row, began.term)
	}
	if n := strings.Count(logs.String(), "elector session goes through a pooler"); n != 1 {
		t.Fatalf("the pooler was said %d times, want once; logged:\n%s", n, logs.String())
	}
}
