package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/testlog"
	"github.com/pgqueue/pgqueue/pglock"
)

// term is one leadership term seen by a test elector.
type term struct {
	holder string
	term   int64
	cause  error // why the term's context ended
}

// testElector runs an elector on name until stop is called.
type testElector struct {
	*pglock.Elector
	holder string
	cancel context.CancelFunc
	done   chan struct{}
	terms  chan term // a term when it begins (cause nil) and when it ends
}

func runElector(t *testing.T, lk *pglock.Locker, name, holder string, cfg pglock.ElectorConfig, leading *atomic.Int32) *testElector {
	t.Helper()
	cfg.Holder = holder
	e, err := lk.NewElector(name, &cfg)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	te := &testElector{Elector: e, holder: holder, cancel: cancel, done: make(chan struct{}), terms: make(chan term, 16)}
	go func() {
		defer close(te.done)
		e.Run(ctx, func(ctx context.Context, n int64) {
			if leading.Add(1) != 1 {
				t.Errorf("%s leads term %d beside another leader", holder, n)
			}
			te.terms <- term{holder: holder, term: n}
			<-ctx.Done()
			leading.Add(-1)
			te.terms <- term{holder: holder, term: n, cause: context.Cause(ctx)}
		})
	}()
	t.Cleanup(te.stop)
	return te
}

// stop cancels Run and waits for it to return.
func (te *testElector) stop() {
	te.cancel()
	<-te.done
}

func (te *testElector) next(t *testing.T, within time.Duration) term {
	t.Helper()
	select {
	case tm := <-te.terms:
		return tm
	case <-time.After(within):
		t.Fatalf("%s: no term event within %s", te.holder, within)
		return term{}
	}
}

// quietLocker returns a Locker on pool whose elector logs go nowhere.
func quietLocker(t *testing.T, pool *pgxpool.Pool) *pglock.Locker {
	t.Helper()
	return newLocker(t, pool, &pglock.Config{Logger: testlog.Discard()})
}

func TestElector(t *testing.T) {
	t.Parallel()

	t.Run("HandsOverOnResign", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "the elector handing over on resign")
		pool := newPool(t)
		// Renewals a second apart: a resign that failed would leave the
		// lease to expire 2s to 3s later, a successful one frees it at once.
		cfg := pglock.ElectorConfig{TTL: 3 * time.Second, RenewInterval: time.Second, RetryInterval: 100 * time.Millisecond, SafetyMargin: 500 * time.Millisecond}
		var leading atomic.Int32
		a := runElector(t, quietLocker(t, pool), "leader", "a", cfg, &leading)
		b := runElector(t, quietLocker(t, pool), "leader", "b", cfg, &leading)

		// Exactly one leads, and keeps leading across renewals.
		var first term
		var leader, follower *testElector
		select {
		case first = <-a.terms:
			leader, follower = a, b
		case first = <-b.terms:
			leader, follower = b, a
		case <-time.After(5 * time.Second):
			t.Fatal("no leader within 5s")
		}
		select {
		case tm := <-follower.terms:
			t.Fatalf("%s leads too: %+v", follower.holder, tm)
		case tm := <-leader.terms:
			t.Fatalf("leader's term ended: %+v", tm)
		case <-time.After(1500 * time.Millisecond):
		}
		if row := readLease(t, pool, "leader"); row.Holder != first.holder || row.Fence != first.term {
			t.Fatalf("lease row %+v, want holder %s fence %d", row, first.holder, first.term)
		}

		// The leader resigns; the follower takes over long before the
		// resigned lease would have expired.
		resigned := time.Now()
		leader.stop()
		if end := leader.next(t, time.Second); end.term != first.term || !errors.Is(end.cause, context.Canceled) {
			t.Fatalf("leader's term ended %+v, want term %d cancelled", end, first.term)
		}
		second := follower.next(t, cfg.TTL+time.Second)
		took := time.Since(resigned)
		if second.term <= first.term {
			t.Fatalf("new term %d after %d, want higher", second.term, first.term)
		}
		if took > 1500*time.Millisecond {
			t.Fatalf("takeover %s after resigning, want well before the lease could expire", took)
		}
		t.Logf("takeover %s after resign", took.Round(time.Millisecond))
	})

	t.Run("TermReplacedInDatabase", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		cfg := pglock.ElectorConfig{TTL: 2 * time.Second, RenewInterval: 200 * time.Millisecond, RetryInterval: 100 * time.Millisecond, SafetyMargin: 400 * time.Millisecond}
		var leading atomic.Int32
		a := runElector(t, quietLocker(t, pool), "leader", "a", cfg, &leading)
		began := a.next(t, 5*time.Second)

		// Someone else takes the term by writing the row; its lease runs
		// long, so no one can take it back during the test.
		intruder := replaceTerm(t, pool, "leader")
		replaced := time.Now()
		end := a.next(t, 2*time.Second)
		if end.term != began.term || !errors.Is(end.cause, pglock.ErrLost) {
			t.Fatalf("term ended %+v, want term %d lost with ErrLost", end, began.term)
		}
		t.Logf("loss noticed %s after the term was replaced", time.Since(replaced).Round(time.Millisecond))
		a.stop()
		if row := readLease(t, pool, "leader"); row != intruder {
			t.Fatalf("lease row %+v after the old leader stopped, want the intruder's %+v", row, intruder)
		}
	})

	t.Run("StaleResignIsNoOp", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		// Renewals are far apart: the resign below comes before any.
		cfg := pglock.ElectorConfig{TTL: 10 * time.Second, RenewInterval: 5 * time.Second, RetryInterval: 100 * time.Millisecond, SafetyMargin: time.Second}
		var leading atomic.Int32
		a := runElector(t, quietLocker(t, pool), "leader", "a", cfg, &leading)
		began := a.next(t, 5*time.Second)
		intruder := replaceTerm(t, pool, "leader")
		a.stop() // resigns term began.term, no longer the lease's
		if end := a.next(t, time.Second); end.term != began.term || !errors.Is(end.cause, context.Canceled) {
			t.Fatalf("term ended %+v, want term %d cancelled by the resign", end, began.term)
		}
		if row := readLease(t, pool, "leader"); row != intruder {
			t.Fatalf("stale resign changed the lease row to %+v, want the intruder's %+v", row, intruder)
		}
	})

	t.Run("NudgeCampaignsNow", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := newPool(t)
		lk := quietLocker(t, pool)
		held, err := lk.TryLockLease(ctx, "leader", "other", time.Minute)
		must(t, err)

		// The follower's first attempt finds the lease held; it would try
		// again only a minute later. The attempt is made to wait on the
		// lease row, so the test knows it happened before the release.
		blocker := begin(t, pool)
		_, err = blocker.Exec(ctx, "SELECT 1 FROM pgqueue.leases WHERE name = 'leader' FOR UPDATE")
		must(t, err)
		cfg := pglock.ElectorConfig{TTL: time.Minute, RetryInterval: time.Minute}
		var leading atomic.Int32
		a := runElector(t, lk, "leader", "a", cfg, &leading)
		var pid int32
		waitFor(t, "the first attempt to wait on the lease row", func() bool {
			err := pool.QueryRow(ctx, `
				SELECT pid FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%leases%'`).Scan(&pid)
			if errors.Is(err, pgx.ErrNoRows) {
				return false
			}
			must(t, err)
			return true
		})
		must(t, blocker.Rollback(ctx))
		waitFor(t, "the first attempt to end", func() bool {
			// The elector shares the pool: once its attempt ended, this
			// query may run on its very connection, which reads itself
			// as active.
			var state string
			must(t, pool.QueryRow(ctx, "SELECT CASE WHEN pid = pg_backend_pid() THEN 'this' ELSE coalesce(state, '') END FROM pg_stat_activity WHERE pid = $1", pid).Scan(&state))
			return state != "active"
		})
		select {
		case tm := <-a.terms:
			t.Fatalf("leads while the lease is held: %+v", tm)
		default:
		}

		must(t, held.Release(ctx))
		nudged := time.Now()
		a.Nudge()
		began := a.next(t, 5*time.Second)
		if began.term <= held.Fence() {
			t.Fatalf("term %d after fence %d, want higher", began.term, held.Fence())
		}
		t.Logf("leads %s after the nudge", time.Since(nudged).Round(time.Millisecond))
	})

	t.Run("DefaultHolderNamesTheProcess", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		host, err := os.Hostname()
		must(t, err)
		want := regexp.MustCompile(fmt.Sprintf("^%s-%d-[0-9a-f]{8}$", regexp.QuoteMeta(host), os.Getpid()))
		var holders []string
		for range 2 {
			var leading atomic.Int32
			e := runElector(t, quietLocker(t, pool), "leader", "", pglock.ElectorConfig{RetryInterval: 100 * time.Millisecond}, &leading)
			e.next(t, 5*time.Second)
			row := readLease(t, pool, "leader")
			if !want.MatchString(row.Holder) {
				t.Fatalf("default holder %q, want host-pid-random matching %s", row.Holder, want)
			}
			holders = append(holders, row.Holder)
			e.stop() // resigns, so the next elector leads at once
		}
		if holders[0] == holders[1] {
			t.Fatalf("two electors of one process share the holder %q", holders[0])
		}
	})
}

// TestElectorHungRenewal: a leader whose renewals hang (here: blocked on
// the lease row's lock) must stop acting SafetyMargin before its lease
// ends, not when a renewal finally times out.
func TestElectorHungRenewal(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "a hung renewal ending the term")
	ctx := t.Context()
	pool := newPool(t)
	// Renewals time out after RenewInterval: here 1.2s, so a renewal sent
	// at 1.2s into the term would give up at 2.4s, after the 2s lease.
	cfg := pglock.ElectorConfig{Holder: "a", TTL: 2 * time.Second, RenewInterval: 1200 * time.Millisecond, RetryInterval: time.Second, SafetyMargin: 500 * time.Millisecond}
	e, err := quietLocker(t, pool).NewElector("leader", &cfg)
	must(t, err)

	began := make(chan struct{})
	type stop struct {
		margin time.Duration // database expiry minus the database's time when the lead ended
		cause  error
	}
	stopped := make(chan stop, 1)
	runCtx, cancelRun := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		first := true
		e.Run(runCtx, func(ctx context.Context, term int64) {
			if !first {
				<-ctx.Done()
				return
			}
			first = false
			close(began)
			<-ctx.Done()
			var ms float64
			err := pool.QueryRow(context.Background(),
				"SELECT extract(epoch FROM expires_at - clock_timestamp()) * 1000 FROM pgqueue.leases WHERE name = 'leader'").Scan(&ms)
			if err != nil {
				t.Error(err)
			}
			stopped <- stop{time.Duration(ms) * time.Millisecond, context.Cause(ctx)}
		})
	}()
	blocker := begin(t, pool)
	t.Cleanup(func() {
		_ = blocker.Rollback(context.Background())
		cancelRun()
		<-runDone
	})
	select {
	case <-began:
	case <-time.After(5 * time.Second):
		t.Fatal("no leader within 5s")
	}
	_, err = blocker.Exec(ctx, "SELECT 1 FROM pgqueue.leases WHERE name = 'leader' FOR UPDATE")
	must(t, err)

	select {
	case s := <-stopped:
		t.Logf("leader stopped %s before its lease ended (margin %s): %v", s.margin, cfg.SafetyMargin, s.cause)
		if !errors.Is(s.cause, pglock.ErrLost) {
			t.Errorf("cause %v, want ErrLost", s.cause)
		}
		if s.margin < cfg.SafetyMargin/2 {
			t.Errorf("leader stopped %s before its lease ended, want about the %s safety margin", s.margin, cfg.SafetyMargin)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("leader still leading 5s after its renewals started to hang")
	}
}

// replaceTerm gives lease name a new term held by "intruder" for a minute,
// as another leader would, and returns the row.
func replaceTerm(t *testing.T, pool *pgxpool.Pool, name string) leaseRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		UPDATE pgqueue.leases
		SET fence = nextval('pgqueue.fence_seq'), holder = 'intruder', expires_at = now() + interval '1 minute'
		WHERE name = $1
		RETURNING holder, fence, expires_at`, name)
	must(t, err)
	row, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[leaseRow])
	must(t, err)
	return row
}
