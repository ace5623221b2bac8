package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// lockBegin starts a transaction on pool that is rolled back when the test
// ends, unless it was committed first.
func lockBegin(t *testing.T, pool *pgxpool.Pool) pgx.Tx {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	must(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// advisoryHolders returns the backends of this database that hold (granted)
// or wait for (not granted) the two-int4 advisory lock k. pg_locks shows the
// keys as oid, unsigned, hence the conversion.
func advisoryHolders(t *testing.T, pool *pgxpool.Pool, k pgqueue.LockKey, granted bool) []int32 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT pid FROM pg_locks
		WHERE locktype = 'advisory'
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 2
		  AND granted = $3
		ORDER BY pid`, int64(uint32(k.Class)), int64(uint32(k.Object)), granted)
	must(t, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	must(t, err)
	return pids
}

// singleHolder returns the one backend holding k, failing the test if there
// is not exactly one.
func singleHolder(t *testing.T, pool *pgxpool.Pool, k pgqueue.LockKey) int32 {
	t.Helper()
	pids := advisoryHolders(t, pool, k, true)
	if len(pids) != 1 {
		t.Fatalf("lock %+v held by backends %v, want exactly one", k, pids)
	}
	return pids[0]
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestXactLock(t *testing.T) {
	t.Parallel()

	t.Run("TryIsBusyUntilCommit", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := newPool(t)
		c := newClient(t, pool, nil)

		tx1 := lockBegin(t, pool)
		f1, err := c.TryXactLock(ctx, tx1, "report")
		must(t, err)
		tx2 := lockBegin(t, pool)
		if _, err := c.TryXactLock(ctx, tx2, "report"); !errors.Is(err, pgqueue.ErrLockBusy) {
			t.Fatalf("second TryXactLock: %v, want ErrLockBusy", err)
		}
		// Another name is another lock.
		if _, err := c.TryXactLock(ctx, tx2, "other report"); err != nil {
			t.Fatalf("TryXactLock of another name: %v", err)
		}
		must(t, tx1.Commit(ctx))
		// A busy answer does not abort tx2: it can try again in the same
		// transaction once the holder is gone.
		f2, err := c.TryXactLock(ctx, tx2, "report")
		if err != nil {
			t.Fatalf("TryXactLock after the holder committed: %v", err)
		}
		if f2 <= f1 {
			t.Fatalf("fence %d after %d, want higher", f2, f1)
		}
		must(t, tx2.Rollback(ctx))
		tx3 := lockBegin(t, pool)
		if _, err := c.TryXactLock(ctx, tx3, "report"); err != nil {
			t.Fatalf("TryXactLock after the holder rolled back: %v", err)
		}
	})

	t.Run("WaitsForTheHolder", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := newPool(t)
		c := newClient(t, pool, nil)

		tx1 := lockBegin(t, pool)
		f1, err := c.XactLock(ctx, tx1, "report")
		must(t, err)
		tx2 := lockBegin(t, pool)
		type result struct {
			fence int64
			err   error
		}
		got := make(chan result, 1)
		go func() {
			f, err := c.XactLock(ctx, tx2, "report")
			got <- result{f, err}
		}()
		waitFor(t, "the second transaction to wait for the lock", func() bool {
			return len(advisoryHolders(t, pool, c.LockKey("report"), false)) == 1
		})
		select {
		case r := <-got:
			t.Fatalf("XactLock returned while the lock was held: %+v", r)
		case <-time.After(100 * time.Millisecond):
		}
		must(t, tx1.Commit(ctx))
		select {
		case r := <-got:
			if r.err != nil {
				t.Fatalf("XactLock after the holder committed: %v", r.err)
			}
			if r.fence <= f1 {
				t.Fatalf("fence %d after %d, want higher", r.fence, f1)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("XactLock still waiting 5s after the holder committed")
		}
	})

	t.Run("WaitEndsWithContext", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		k := c.LockKey("report")

		holder := lockBegin(t, pool)
		_, err := c.XactLock(ctx, holder, "report")
		must(t, err)

		// A deadline: pgx gives up on the connection (closing it, which
		// ends the server's wait) and reports the context's error.
		tx := lockBegin(t, pool)
		dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err = c.XactLock(dctx, tx, "report")
		took := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) || !pgconn.Timeout(err) {
			t.Fatalf("XactLock past its deadline: %v, want context.DeadlineExceeded (a pgconn timeout)", err)
		}
		if took < 150*time.Millisecond || took > 5*time.Second {
			t.Fatalf("XactLock gave up after %s, want about 200ms", took)
		}

		// A cancellation.
		tx = lockBegin(t, pool)
		cctx, cancelWait := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancelWait)
		if _, err := c.XactLock(cctx, tx, "report"); !errors.Is(err, context.Canceled) {
			t.Fatalf("XactLock cancelled: %v, want context.Canceled", err)
		}

		// Neither wait is left behind on the server, where it could still
		// be granted the lock once the holder commits.
		if pids := advisoryHolders(t, pool, k, false); len(pids) != 0 {
			t.Fatalf("backends %v still wait for the lock after XactLock returned", pids)
		}
		must(t, holder.Commit(ctx))
		tx = lockBegin(t, pool)
		if _, err := c.TryXactLock(ctx, tx, "report"); err != nil {
			t.Fatalf("TryXactLock after every holder and waiter left: %v", err)
		}
	})

	t.Run("FencesIncreaseWithEachAcquisition", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := newPool(t)
		c := newClient(t, pool, nil)

		// Eight transactions queue on one name; each records its fence
		// while it holds the lock, so the slice is in acquisition order.
		var (
			mu     sync.Mutex
			fences []int64
		)
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := range 16 {
			wg.Go(func() {
				tx, err := pool.Begin(ctx)
				if err != nil {
					errs <- err
					return
				}
				defer func() { _ = tx.Rollback(context.Background()) }()
				var f int64
				if i%4 == 0 {
					// Some try first and wait only when busy.
					f, err = c.TryXactLock(ctx, tx, "report")
					if errors.Is(err, pgqueue.ErrLockBusy) {
						f, err = c.XactLock(ctx, tx, "report")
					}
				} else {
					f, err = c.XactLock(ctx, tx, "report")
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				fences = append(fences, f)
				mu.Unlock()
				time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
				errs <- tx.Commit(ctx)
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			must(t, err)
		}
		if len(fences) != 16 || !slices.IsSorted(fences) || len(slices.Compact(slices.Clone(fences))) != 16 {
			t.Fatalf("fences in acquisition order %v, want 16 strictly increasing", fences)
		}
	})
}

func TestLockKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := newPool(t)
	if _, err := pgqueue.Migrate(ctx, pool, "other"); err != nil {
		t.Fatal(err)
	}
	def := newClient(t, pool, nil)
	other := newClient(t, pool, &pgqueue.Config{Schema: "other"})

	t.Run("DerivedAsDocumented", func(t *testing.T) {
		fnv32a := func(s string) int32 {
			h := fnv.New32a()
			_, _ = h.Write([]byte(s))
			return int32(h.Sum32())
		}
		for _, tc := range []struct {
			c      *pgqueue.Client
			schema string
		}{{def, "pgqueue"}, {other, "other"}} {
			k := tc.c.LockKey("nightly")
			want := pgqueue.LockKey{Class: fnv32a("pgqueue:" + tc.schema), Object: fnv32a("nightly")}
			if k != want {
				t.Errorf("schema %s: LockKey(nightly) = %+v, want %+v", tc.schema, k, want)
			}
		}
		ka, kb := def.LockKey("nightly"), other.LockKey("nightly")
		if ka == kb || ka.Class == kb.Class {
			t.Fatalf("schemas pgqueue and other share key %+v / %+v", ka, kb)
		}
		if def.LockKey("nightly") == def.LockKey("weekly") {
			t.Fatal("two names share a key")
		}
	})

	t.Run("SchemasDoNotExcludeEachOther", func(t *testing.T) {
		txA, txB := lockBegin(t, pool), lockBegin(t, pool)
		if _, err := def.TryXactLock(ctx, txA, "nightly"); err != nil {
			t.Fatal(err)
		}
		if _, err := other.TryXactLock(ctx, txB, "nightly"); err != nil {
			t.Fatalf("schema other's lock of the name schema pgqueue holds: %v", err)
		}
		// Within one schema the name is exclusive.
		txC := lockBegin(t, pool)
		if _, err := def.TryXactLock(ctx, txC, "nightly"); !errors.Is(err, pgqueue.ErrLockBusy) {
			t.Fatalf("same schema, same name: %v, want ErrLockBusy", err)
		}
	})

	t.Run("SeparateFromBigintKeySpace", func(t *testing.T) {
		k := def.LockKey("nightly")
		tx := lockBegin(t, pool)
		if _, err := def.TryXactLock(ctx, tx, "nightly"); err != nil {
			t.Fatal(err)
		}
		conn, err := pool.Acquire(ctx)
		must(t, err)
		defer conn.Release()
		var got bool
		must(t, conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1::bigint)", k.Int64()).Scan(&got))
		if !got {
			t.Fatal("a bigint advisory lock on LockKey.Int64() is blocked by pgqueue's lock")
		}
		// Int64 is where pg_locks shows the key: the bigint form's classid
		// and objid are its high and low halves (objsubid 1), the same
		// columns that show the two-int4 form (objsubid 2).
		rows, err := pool.Query(ctx, `
			SELECT objsubid, (classid::bigint << 32) | objid::bigint
			FROM pg_locks
			WHERE locktype = 'advisory' AND granted
			  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			ORDER BY objsubid`)
		must(t, err)
		type lock struct {
			Sub int16
			Key int64
		}
		locks, err := pgx.CollectRows(rows, pgx.RowToStructByPos[lock])
		must(t, err)
		want := []lock{{1, k.Int64()}, {2, k.Int64()}}
		if !slices.Equal(locks, want) {
			t.Fatalf("pg_locks %+v, want %+v", locks, want)
		}
		var unlocked bool
		must(t, conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1::bigint)", k.Int64()).Scan(&unlocked))
		if !unlocked {
			t.Fatal("bigint unlock failed")
		}
		// And the other way round: a bigint holder does not block pgqueue.
		must(t, conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1::bigint)", other.LockKey("weekly").Int64()).Scan(&got))
		if !got {
			t.Fatal("bigint lock failed")
		}
		tx2 := lockBegin(t, pool)
		if _, err := other.TryXactLock(ctx, tx2, "weekly"); err != nil {
			t.Fatalf("pgqueue lock beside a bigint lock on the same number: %v", err)
		}
		_, err = conn.Exec(ctx, "SELECT pg_advisory_unlock_all()")
		must(t, err)
	})
}

func TestSessionLock(t *testing.T) {
	t.Parallel()
	fast := &pgqueue.SessionLockOpts{KeepaliveInterval: 100 * time.Millisecond}

	// unlockLater makes sure a lock's connection and keepalive end with the
	// test, whatever happened to it.
	unlockLater := func(t *testing.T, l *pgqueue.SessionLock) {
		t.Cleanup(func() { _ = l.Unlock(context.Background()) })
	}

	t.Run("ExcludesOthersUntilUnlock", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := newPool(t)
		c1, c2 := newClient(t, pool, nil), newClient(t, pool, nil)

		l, err := c1.TrySessionLock(ctx, "compact", fast)
		must(t, err)
		unlockLater(t, l)
		if l.Name() != "compact" || l.Fence() <= 0 {
			t.Fatalf("lock %q fence %d", l.Name(), l.Fence())
		}
		if _, err := c2.TrySessionLock(ctx, "compact", fast); !errors.Is(err, pgqueue.ErrLockBusy) {
			t.Fatalf("TrySessionLock of a held lock: %v, want ErrLockBusy", err)
		}
		// Transaction locks of the name share the key.
		tx := lockBegin(t, pool)
		if _, err := c2.TryXactLock(ctx, tx, "compact"); !errors.Is(err, pgqueue.ErrLockBusy) {
			t.Fatalf("TryXactLock of a session-held lock: %v, want ErrLockBusy", err)
		}
		must(t, tx.Rollback(ctx))
		// A wait ends with its context, and leaves nothing behind.
		dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if _, err := c2.SessionLock(dctx, "compact", fast); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("SessionLock past its deadline: %v, want context.DeadlineExceeded", err)
		}
		if pids := advisoryHolders(t, pool, c1.LockKey("compact"), false); len(pids) != 0 {
			t.Fatalf("backends %v still wait for the lock after SessionLock returned", pids)
		}

		must(t, l.Unlock(ctx))
		if cause := context.Cause(l.Context()); !errors.Is(cause, pgqueue.ErrLockReleased) {
			t.Fatalf("context cause after Unlock: %v, want ErrLockReleased", cause)
		}
		if err := l.Unlock(ctx); !errors.Is(err, pgqueue.ErrNotLocked) {
			t.Fatalf("second Unlock: %v, want ErrNotLocked", err)
		}
		if pids := advisoryHolders(t, pool, c1.LockKey("compact"), true); len(pids) != 0 {
			t.Fatalf("lock still held by %v after Unlock", pids)
		}
		l2, err := c2.TrySessionLock(ctx, "compact", fast)
		if err != nil {
			t.Fatalf("TrySessionLock after Unlock: %v", err)
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
		c := newClient(t, pool, nil)

		l, err := c.SessionLock(ctx, "compact", fast)
		must(t, err)
		unlockLater(t, l)
		got := make(chan *pgqueue.SessionLock, 1)
		go func() {
			l2, err := c.SessionLock(ctx, "compact", fast)
			if err != nil {
				t.Errorf("waiting SessionLock: %v", err)
			}
			got <- l2
		}()
		waitFor(t, "the second session to wait", func() bool {
			return len(advisoryHolders(t, pool, c.LockKey("compact"), false)) == 1
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
		c := newClient(t, pool, nil)
		k := c.LockKey("compact")

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

		l, err := c.SessionLock(ctx, "compact", fast)
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
		if _, err := c.TrySessionLock(ctx, "compact", fast); !errors.Is(err, pgqueue.ErrLockBusy) {
			t.Fatalf("TrySessionLock after the pool's unlock attempts: %v, want ErrLockBusy", err)
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

	t.Run("LostWhenBackendTerminated", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := newPool(t)
		c1, c2 := newClient(t, pool, nil), newClient(t, pool, nil)
		k := c1.LockKey("compact")

		l, err := c1.SessionLock(ctx, "compact", fast)
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
		if cause := context.Cause(l.Context()); !errors.Is(cause, pgqueue.ErrLockLost) {
			t.Fatalf("context cause %v, want ErrLockLost", cause)
		}
		if err := l.Unlock(ctx); !errors.Is(err, pgqueue.ErrLockLost) {
			t.Fatalf("Unlock of a lost lock: %v, want ErrLockLost", err)
		}
		l2, err := c2.TrySessionLock(ctx, "compact", fast)
		if err != nil {
			t.Fatalf("TrySessionLock after the holder's backend ended: %v", err)
		}
		unlockLater(t, l2)
		if l2.Fence() <= l.Fence() {
			t.Fatalf("fence %d after %d, want higher", l2.Fence(), l.Fence())
		}
	})
}

// leaseRow is a lease lock's row as stored.
type leaseRow struct {
	Holder    string
	Fence     int64
	ExpiresAt time.Time
}

func readLease(t *testing.T, pool *pgxpool.Pool, name string) leaseRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT holder, fence, expires_at FROM pgqueue.leases WHERE name = $1", name)
	must(t, err)
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[leaseRow])
	must(t, err)
	return r
}

// waitLeaseExpired waits until the database clock has passed the lease's
// expiry.
func waitLeaseExpired(t *testing.T, pool *pgxpool.Pool, name string) {
	t.Helper()
	waitFor(t, "lease "+name+" to expire", func() bool {
		var expired bool
		must(t, pool.QueryRow(context.Background(), "SELECT expires_at <= now() FROM pgqueue.leases WHERE name = $1", name).Scan(&expired))
		return expired
	})
}

func TestLeaseLock(t *testing.T) {
	t.Parallel()

	t.Run("TakenOverAfterExpiry", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := newPool(t)
		c := newClient(t, pool, nil)

		l1, err := c.AcquireLease(ctx, "cron", "a", time.Second)
		must(t, err)
		if l1.Name() != "cron" || l1.Fence() <= 0 || time.Until(l1.ValidUntil()) > time.Second {
			t.Fatalf("lease %q fence %d valid until %s", l1.Name(), l1.Fence(), l1.ValidUntil())
		}
		for _, holder := range []string{"b", "a"} {
			if _, err := c.AcquireLease(ctx, "cron", holder, time.Second); !errors.Is(err, pgqueue.ErrLockBusy) {
				t.Fatalf("AcquireLease by %s of a held lease: %v, want ErrLockBusy", holder, err)
			}
		}

		waitLeaseExpired(t, pool, "cron")
		l2, err := c.AcquireLease(ctx, "cron", "b", time.Second)
		if err != nil {
			t.Fatalf("takeover after expiry: %v", err)
		}
		if l2.Fence() <= l1.Fence() {
			t.Fatalf("takeover fence %d after %d, want higher", l2.Fence(), l1.Fence())
		}
		before := readLease(t, pool, "cron")
		if before.Holder != "b" || before.Fence != l2.Fence() {
			t.Fatalf("row after takeover %+v, want holder b fence %d", before, l2.Fence())
		}
		// The old holder can neither extend nor end the new holder's lease.
		if err := l1.Renew(ctx); !errors.Is(err, pgqueue.ErrLockLost) {
			t.Fatalf("old holder's Renew: %v, want ErrLockLost", err)
		}
		if err := l1.Release(ctx); !errors.Is(err, pgqueue.ErrLockLost) {
			t.Fatalf("old holder's Release: %v, want ErrLockLost", err)
		}
		if after := readLease(t, pool, "cron"); after != before {
			t.Fatalf("old holder changed the row: %+v, was %+v", after, before)
		}
		if _, err := c.AcquireLease(ctx, "cron", "a", time.Second); !errors.Is(err, pgqueue.ErrLockBusy) {
			t.Fatalf("old holder re-acquiring a held lease: %v, want ErrLockBusy", err)
		}
		// The new holder renews.
		must(t, l2.Renew(ctx))
		if after := readLease(t, pool, "cron"); !after.ExpiresAt.After(before.ExpiresAt) || after.Fence != before.Fence {
			t.Fatalf("row after Renew %+v, was %+v", after, before)
		}
	})

	t.Run("ExpiredLeaseCannotBeRenewed", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		l, err := c.AcquireLease(ctx, "cron", "a", time.Second)
		must(t, err)
		waitLeaseExpired(t, pool, "cron")
		// No one took it, but an expired lease may be someone's already.
		if err := l.Renew(ctx); !errors.Is(err, pgqueue.ErrLockLost) {
			t.Fatalf("Renew after expiry: %v, want ErrLockLost", err)
		}
	})

	t.Run("ReleaseFreesAtOnce", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := newPool(t)
		c := newClient(t, pool, nil)

		l1, err := c.AcquireLease(ctx, "cron", "a", time.Minute)
		must(t, err)
		must(t, l1.Release(ctx))
		l2, err := c.AcquireLease(ctx, "cron", "b", time.Minute)
		if err != nil {
			t.Fatalf("AcquireLease right after Release: %v", err)
		}
		if l2.Fence() <= l1.Fence() {
			t.Fatalf("fence %d after %d, want higher", l2.Fence(), l1.Fence())
		}
		before := readLease(t, pool, "cron")
		if err := l1.Release(ctx); !errors.Is(err, pgqueue.ErrLockLost) {
			t.Fatalf("second Release: %v, want ErrLockLost", err)
		}
		if after := readLease(t, pool, "cron"); after != before {
			t.Fatalf("stale Release changed the row: %+v, was %+v", after, before)
		}
	})

	t.Run("InvalidTTL", func(t *testing.T) {
		t.Parallel()
		c := newClient(t, newPool(t), nil)
		if _, err := c.AcquireLease(t.Context(), "cron", "a", 0); !errors.Is(err, pgqueue.ErrInvalidOption) {
			t.Fatalf("AcquireLease with ttl 0: %v, want ErrInvalidOption", err)
		}
	})
}

// term is one leadership term seen by a test elector.
type term struct {
	holder string
	term   int64
	cause  error // why the term's context ended
}

// testElector runs an elector on name until stop is called.
type testElector struct {
	holder string
	cancel context.CancelFunc
	done   chan struct{}
	terms  chan term // a term when it begins (cause nil) and when it ends
}

func runElector(t *testing.T, c *pgqueue.Client, name, holder string, cfg pgqueue.ElectorConfig, leading *atomic.Int32) *testElector {
	t.Helper()
	cfg.Holder = holder
	e, err := c.NewElector(name, &cfg)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	te := &testElector{holder: holder, cancel: cancel, done: make(chan struct{}), terms: make(chan term, 16)}
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

func TestElector(t *testing.T) {
	t.Parallel()

	t.Run("HandsOverOnResign", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		// Renewals a second apart: a resign that failed would leave the
		// lease to expire 2s to 3s later, a successful one frees it at once.
		cfg := pgqueue.ElectorConfig{TTL: 3 * time.Second, RenewInterval: time.Second, RetryInterval: 100 * time.Millisecond, SafetyMargin: 500 * time.Millisecond}
		var leading atomic.Int32
		a := runElector(t, newClient(t, pool, &pgqueue.Config{Logger: quietLogger()}), "leader", "a", cfg, &leading)
		b := runElector(t, newClient(t, pool, &pgqueue.Config{Logger: quietLogger()}), "leader", "b", cfg, &leading)

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
		cfg := pgqueue.ElectorConfig{TTL: 2 * time.Second, RenewInterval: 200 * time.Millisecond, RetryInterval: 100 * time.Millisecond, SafetyMargin: 400 * time.Millisecond}
		var leading atomic.Int32
		a := runElector(t, newClient(t, pool, &pgqueue.Config{Logger: quietLogger()}), "leader", "a", cfg, &leading)
		began := a.next(t, 5*time.Second)

		// Someone else takes the term by writing the row; its lease runs
		// long, so no one can take it back during the test.
		intruder := replaceTerm(t, pool, "leader")
		replaced := time.Now()
		end := a.next(t, 2*time.Second)
		if end.term != began.term || !errors.Is(end.cause, pgqueue.ErrLockLost) {
			t.Fatalf("term ended %+v, want term %d lost with ErrLockLost", end, began.term)
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
		cfg := pgqueue.ElectorConfig{TTL: 10 * time.Second, RenewInterval: 5 * time.Second, RetryInterval: 100 * time.Millisecond, SafetyMargin: time.Second}
		var leading atomic.Int32
		a := runElector(t, newClient(t, pool, &pgqueue.Config{Logger: quietLogger()}), "leader", "a", cfg, &leading)
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
}

// TestElectorHungRenewal: a leader whose renewals hang (here: blocked on
// the lease row's lock) must stop acting SafetyMargin before its lease
// ends, not when a renewal finally times out.
func TestElectorHungRenewal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := newPool(t)
	// Renewals time out after RenewInterval: here 1.2s, so a renewal sent
	// at 1.2s into the term would give up at 2.4s, after the 2s lease.
	cfg := pgqueue.ElectorConfig{Holder: "a", TTL: 2 * time.Second, RenewInterval: 1200 * time.Millisecond, RetryInterval: time.Second, SafetyMargin: 500 * time.Millisecond}
	e, err := newClient(t, pool, &pgqueue.Config{Logger: quietLogger()}).NewElector("leader", &cfg)
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
	blocker := lockBegin(t, pool)
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
		if !errors.Is(s.cause, pgqueue.ErrLockLost) {
			t.Errorf("cause %v, want ErrLockLost", s.cause)
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

type spanArgs struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

func (spanArgs) Kind() string { return "span" }

func TestSingletonJobs(t *testing.T) {
	t.Parallel()
	const (
		clients = 3
		workers = 4
		jobs    = 30
	)
	keys := []string{"alpha", "beta"}

	for _, mode := range []struct {
		name string
		mode pgqueue.SingletonMode
	}{{"Xact", pgqueue.SingletonXact}, {"Session", pgqueue.SingletonSession}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			pool := newPool(t)
			// spans: when each job's handler ran, by the database clock.
			// snoozes: every hand-back of a running job to the queue (a
			// busy key) with the attempt count it left.
			_, err := pool.Exec(ctx, `
				CREATE TABLE spans (
					id         bigserial PRIMARY KEY,
					job_id     bigint NOT NULL,
					key        text NOT NULL,
					lock_fence bigint NOT NULL,
					started    timestamptz NOT NULL,
					ended      timestamptz NOT NULL
				);
				CREATE TABLE snoozes (job_id bigint, attempt int);
				CREATE FUNCTION audit_snooze() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					INSERT INTO snoozes VALUES (NEW.id, NEW.attempt);
					RETURN NULL;
				END $$;
				CREATE TRIGGER audit_snooze AFTER UPDATE ON pgqueue.jobs FOR EACH ROW
					WHEN (OLD.state = 'running' AND NEW.state IN ('scheduled', 'available'))
					EXECUTE FUNCTION audit_snooze();`)
			must(t, err)

			fc := newClient(t, pool, nil)
			ws := pgqueue.NewWorkers()
			record := func(ctx context.Context, tx pgx.Tx, job *pgqueue.Job[spanArgs], start time.Time) error {
				_, err := tx.Exec(ctx, `INSERT INTO spans (job_id, key, lock_fence, started, ended) VALUES ($1, $2, $3, $4, clock_timestamp())`,
					job.ID, job.Args.Key, job.LockFence, start)
				return err
			}
			work := func(ctx context.Context, job *pgqueue.Job[spanArgs]) error {
				if job.LockFence <= 0 {
					return fmt.Errorf("job %d: no lock fence", job.ID)
				}
				pause := time.Duration(5+rand.IntN(15)) * time.Millisecond
				if mode.mode == pgqueue.SingletonXact {
					if job.Tx == nil {
						return fmt.Errorf("job %d: no Tx in xact mode", job.ID)
					}
					var start time.Time
					if err := job.Tx.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&start); err != nil {
						return err
					}
					time.Sleep(pause)
					return record(ctx, job.Tx, job, start)
				}
				if job.Tx != nil {
					return fmt.Errorf("job %d: Tx in session mode", job.ID)
				}
				var start time.Time
				if err := pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&start); err != nil {
					return err
				}
				time.Sleep(pause)
				tx, err := pool.Begin(ctx)
				if err != nil {
					return err
				}
				defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
				if err := fc.CheckFenceTx(ctx, tx, pgqueue.SingletonResource(job.Args.Key), job.LockFence); err != nil {
					return err
				}
				if err := record(ctx, tx, job, start); err != nil {
					return err
				}
				return tx.Commit(ctx)
			}
			must(t, pgqueue.AddWorkerFunc(ws, work, &pgqueue.WorkerOpts{SingletonMode: mode.mode}))

			for i := range clients {
				cfg := pool.Config()
				cfg.MaxConns = workers + 4
				p, err := pgxpool.NewWithConfig(ctx, cfg)
				must(t, err)
				t.Cleanup(p.Close)
				startClient(t, p, ws, &pgqueue.Config{
					ID:                  fmt.Sprintf("client%d", i),
					Queues:              map[string]pgqueue.QueueConfig{pgqueue.DefaultQueue: {MaxWorkers: workers}},
					SingletonRetryDelay: 20 * time.Millisecond,
					SchedulerInterval:   20 * time.Millisecond,
					FetchPollInterval:   20 * time.Millisecond,
					Logger:              quietLogger(),
				})
			}
			params := make([]pgqueue.EnqueueParams, jobs)
			for i := range params {
				key := keys[i%len(keys)]
				params[i] = pgqueue.EnqueueParams{Args: spanArgs{Key: key, N: i}, Opts: &pgqueue.InsertOpts{SingletonKey: key}}
			}
			n, err := fc.EnqueueMany(ctx, params)
			if err != nil || n != jobs {
				t.Fatalf("enqueued %d jobs: %v", n, err)
			}
			waitFor(t, "every job to complete", func() bool {
				return countJobs(t, pool, "state = 'completed'") == jobs
			})

			var overlaps []string
			rows, err := pool.Query(ctx, `
				SELECT format('%s: job %s [%s, %s] overlaps job %s [%s, %s]', a.key, a.job_id, a.started, a.ended, b.job_id, b.started, b.ended)
				FROM spans a JOIN spans b ON a.key = b.key AND a.id < b.id
				WHERE tstzrange(a.started, a.ended) && tstzrange(b.started, b.ended)`)
			must(t, err)
			overlaps, err = pgx.CollectRows(rows, pgx.RowTo[string])
			must(t, err)
			if len(overlaps) > 0 {
				t.Errorf("%d overlapping runs of one key, e.g. %s", len(overlaps), overlaps[0])
			}
			if n := countJobs(t, pool, "attempt <> 1 OR jsonb_array_length(errors) > 0"); n != 0 {
				t.Errorf("%d jobs spent more than one attempt or failed", n)
			}
			var spans, distinct, snoozed, snoozeAttempts int
			must(t, pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT job_id), (SELECT count(*) FROM snoozes), (SELECT count(*) FROM snoozes WHERE attempt <> 0) FROM spans`).
				Scan(&spans, &distinct, &snoozed, &snoozeAttempts))
			if spans != jobs || distinct != jobs {
				t.Errorf("%d spans of %d jobs, want one per job", spans, distinct)
			}
			if snoozed == 0 {
				t.Error("no job found its key busy: the test did not test that")
			}
			if snoozeAttempts != 0 {
				t.Errorf("%d hand-backs to the queue kept the attempt (a failure, or a busy key charged an attempt)", snoozeAttempts)
			}
			// Each key's runs, in time order, hold increasing lock fences.
			if n := countFenceOrderViolations(t, pool); n != 0 {
				t.Errorf("%d runs of a key hold a lower lock fence than the run before", n)
			}
			if !t.Failed() {
				t.Logf("%d jobs, %d busy hand-backs, no overlap", jobs, snoozed)
			}
		})
	}
}

func countFenceOrderViolations(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	must(t, pool.QueryRow(context.Background(), `
		SELECT count(*) FROM (
			SELECT lock_fence, lag(lock_fence) OVER (PARTITION BY key ORDER BY started) AS prev FROM spans
		) s WHERE lock_fence <= prev`).Scan(&n))
	return n
}
