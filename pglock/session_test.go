package pglock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/pglock"
)

func TestSessionLock(t *testing.T) {
	t.Parallel()
	fast := &pglock.SessionLockOpts{KeepaliveInterval: 100 * time.Millisecond}

	// unlockLater makes sure a lock's connection and keepalive end with the
	// test, whatever happened to it.
	unlockLater := func(t *testing.T, l *pglock.SessionLock) {
		t.Cleanup(func() { _ = l.Unlock(context.Background()) })
	}

	t.Run("ExcludesOthersUntilUnlock", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := newPool(t)
		lk1, lk2 := newLocker(t, pool, nil), newLocker(t, pool, nil)

		l, err := lk1.TryLockSession(ctx, "compact", fast)
		must(t, err)
		unlockLater(t, l)
		if l.Name() != "compact" || l.Fence() <= 0 {
			t.Fatalf("lock %q fence %d", l.Name(), l.Fence())
		}
		if _, err := lk2.TryLockSession(ctx, "compact", fast); !errors.Is(err, pglock.ErrBusy) {
			t.Fatalf("TryLockSession of a held lock: %v, want ErrBusy", err)
		}
		// Transaction locks of the name share the key.
		tx := begin(t, pool)
		if _, err := lk2.TryLockXact(ctx, tx, "compact"); !errors.Is(err, pglock.ErrBusy) {
			t.Fatalf("TryLockXact of a session-held lock: %v, want ErrBusy", err)
		}
		must(t, tx.Rollback(ctx))
		// A wait ends with its context, and leaves nothing behind.
		dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if _, err := lk2.LockSession(dctx, "compact", fast); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("LockSession past its deadline: %v, want context.DeadlineExceeded", err)
		}
		if pids := advisoryHolders(t, pool, lk1.Key("compact"), false); len(pids) != 0 {
			t.Fatalf("backends %v still wait for the lock after LockSession returned", pids)
		}

		must(t, l.Unlock(ctx))
		if cause := context.Cause(l.Context()); !errors.Is(cause, pglock.ErrReleased) {
			t.Fatalf("context cause after Unlock: %v, want ErrReleased", cause)
		}
		if err := l.Unlock(ctx); !errors.Is(err, pglock.ErrNotLocked) {
			t.Fatalf("second Unlock: %v, want ErrNotLocked", err)
		}
		if pids := advisoryHolders(t, pool, lk1.Key("compact"), true); len(pids) != 0 {
			t.Fatalf("lock still held by %v after Unlock", pids)
		}
		l2, err := lk2.TryLockSession(ctx, "compact", fast)
		if err != nil {
			t.Fatalf("TryLockSession after Unlock: %v", err)
		}
		unlockLater(t, l2)
		if l2.Fence() <= l.Fence() {
			t.Fatalf("fence %d after %d, want higher", l2.Fence(), l.Fence())
		}
	})

	t.Run("WaiterGetsItAfterUnlock", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := newPool(t)
		lk := newLocker(t, pool, nil)

		l, err := lk.LockSession(ctx, "compact", fast)
		must(t, err)
		unlockLater(t, l)
		got := make(chan *pglock.SessionLock, 1)
		go func() {
			l2, err := lk.LockSession(ctx, "compact", fast)
			if err != nil {
				t.Errorf("waiting LockSession: %v", err)
			}
			got <- l2
		}()
		// In one process the waiter waits for the process-local guard
		// (a session lock is re-entrant within a session; the guard keeps
		// two holders apart whatever their connections).
		waitFor(t, "the second session to wait", func() bool {
			return pglock.GuardWaiters(lk, "compact") == 1
		})
		must(t, l.Unlock(ctx))
		select {
		case l2 := <-got:
			if l2 == nil {
				t.FailNow()
			}
			unlockLater(t, l2)
			if l2.Fence() <= l.Fence() {
				t.Fatalf("fence %d after %d, want higher", l2.Fence(), l.Fence())
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiter did not get the lock within 5s of Unlock")
		}
	})

	// The pool pitfall: a session lock taken on a pooled connection is
	// unlocked on whatever connection the pool hands out next, which
	// silently fails, and the lock outlives its user. Through the API the
	// lock lives on a backend of its own, which no pool connection is.
	t.Run("LivesOnItsOwnBackend", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := newPool(t)
		lk := newLocker(t, pool, nil)
		k := lk.Key("compact")

		// Fill the pool with a few connections.
		var conns []*pgxpool.Conn
		for range 5 {
			conn, err := pool.Acquire(ctx)
			must(t, err)
			conns = append(conns, conn)
		}
		for _, conn := range conns {
			conn.Release()
		}

		l, err := lk.LockSession(ctx, "compact", fast)
		must(t, err)
		unlockLater(t, l)
		lockPid := singleHolder(t, pool, k)

		idle := pool.AcquireAllIdle(ctx)
		if len(idle) < 5 {
			t.Fatalf("%d idle pool connections, want at least 5", len(idle))
		}
		for _, conn := range idle {
			if pid := conn.Conn().PgConn().PID(); pid == uint32(lockPid) {
				t.Fatalf("the lock's backend %d is a pool connection", pid)
			}
			// No pool connection can release the lock: PostgreSQL says
			// false (with a warning) and the lock stays where it is.
			var released bool
			must(t, conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1::int4, $2::int4)", k.Class, k.Object).Scan(&released))
			if released {
				t.Fatalf("pool connection %d released the session lock", conn.Conn().PgConn().PID())
			}
		}
		for _, conn := range idle {
			conn.Release()
		}
		if pid := singleHolder(t, pool, k); pid != lockPid {
			t.Fatalf("lock moved from backend %d to %d", lockPid, pid)
		}
		if _, err := lk.TryLockSession(ctx, "compact", fast); !errors.Is(err, pglock.ErrBusy) {
			t.Fatalf("TryLockSession after the pool's unlock attempts: %v, want ErrBusy", err)
		}

		// Unlock runs on the lock's own backend: PostgreSQL answered true
		// there (else Unlock would say ErrNotLocked), then the backend left.
		must(t, l.Unlock(ctx))
		if pids := advisoryHolders(t, pool, k, true); len(pids) != 0 {
			t.Fatalf("lock held by %v after Unlock", pids)
		}
		waitFor(t, "the lock's backend to end", func() bool {
			var n int
			must(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", lockPid).Scan(&n))
			return n == 0
		})
	})

	// relayedLock takes a session lock through a relay, checked every
	// 100 ms with timeout, released when the test ends.
	relayedLock := func(t *testing.T, timeout time.Duration) (*relay, *pglock.SessionLock) {
		t.Helper()
		_, r, lk := relayedLocker(t, nil)
		l, err := lk.LockSession(t.Context(), "relayed", &pglock.SessionLockOpts{KeepaliveInterval: 100 * time.Millisecond, KeepaliveTimeout: timeout})
		must(t, err)
		unlockLater(t, l)
		return r, l
	}

	// A check is bounded by KeepaliveTimeout, not by the interval: a
	// server that answers late keeps the lock, one that does not answer
	// within the timeout loses it.
	t.Run("SlowAnswerKeepsTheLock", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a session lock kept through a server answering late")
		r, l := relayedLock(t, 10*time.Second)
		r.Pause() // several intervals without an answer
		time.Sleep(time.Second)
		r.Resume()
		select {
		case <-l.Lost():
			t.Fatalf("lost after a check answered late, within the timeout: %v", context.Cause(l.Context()))
		case <-time.After(300 * time.Millisecond):
		}
		must(t, l.Unlock(t.Context()))
	})

	t.Run("LostWhenServerStopsAnswering", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a session lock lost when the server stops answering")
		r, l := relayedLock(t, 500*time.Millisecond)
		r.Pause()
		select {
		case <-l.Lost():
		case <-time.After(30 * time.Second):
			r.Resume()
			t.Fatal("not lost 30 s after the server stopped answering, with a timeout of 500 ms")
		}
		r.Resume()
		if cause := context.Cause(l.Context()); !errors.Is(cause, pglock.ErrLost) {
			t.Fatalf("context cause %v, want ErrLost", cause)
		}
		if err := l.Unlock(t.Context()); !errors.Is(err, pglock.ErrLost) {
			t.Fatalf("Unlock after the loss: %v, want ErrLost", err)
		}
	})

	t.Run("LostWhenBackendTerminated", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a session lock lost when its backend is terminated")
		ctx := t.Context()
		pool := newPool(t)
		lk1, lk2 := newLocker(t, pool, nil), newLocker(t, pool, nil)
		k := lk1.Key("compact")

		l, err := lk1.LockSession(ctx, "compact", fast)
		must(t, err)
		unlockLater(t, l)
		select {
		case <-l.Lost():
			t.Fatal("Lost closed while the lock is held")
		case <-time.After(300 * time.Millisecond):
		}

		pid := singleHolder(t, pool, k)
		var terminated bool
		must(t, pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&terminated))
		if !terminated {
			t.Fatalf("could not terminate backend %d", pid)
		}
		start := time.Now()
		select {
		case <-l.Lost():
		case <-time.After(2 * time.Second):
			t.Fatal("Lost not closed within 2s (20 keepalive intervals) of the backend's end")
		}
		t.Logf("loss noticed after %s", time.Since(start).Round(time.Millisecond))
		select {
		case <-l.Context().Done():
		default:
			t.Fatal("Context not done after Lost")
		}
		if cause := context.Cause(l.Context()); !errors.Is(cause, pglock.ErrLost) {
			t.Fatalf("context cause %v, want ErrLost", cause)
		}
		if err := l.Unlock(ctx); !errors.Is(err, pglock.ErrLost) {
			t.Fatalf("Unlock of a lost lock: %v, want ErrLost", err)
		}
		l2, err := lk2.TryLockSession(ctx, "compact", fast)
		if err != nil {
			t.Fatalf("TryLockSession after the holder's backend ended: %v", err)
		}
		unlockLater(t, l2)
		if l2.Fence() <= l.Fence() {
			t.Fatalf("fence %d after %d, want higher", l2.Fence(), l.Fence())
		}
	})
}
