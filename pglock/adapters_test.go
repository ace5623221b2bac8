package pglock_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/filelock"
	"github.com/pgqueue/pgqueue/locks"
	"github.com/pgqueue/pgqueue/locks/lockstest"
	"github.com/pgqueue/pgqueue/pglock"
	"github.com/pgqueue/pgqueue/pglock/fencetest"
)

func TestSessionLockerContract(t *testing.T) {
	t.Parallel()
	lockstest.Run(t, func(t *testing.T) locks.Locker {
		return newLocker(t, newPool(t), nil).SessionLocker("contract", nil)
	})
}

func TestXactLockerContract(t *testing.T) {
	t.Parallel()
	lockstest.Run(t, func(t *testing.T) locks.Locker {
		return newLocker(t, newPool(t), nil).XactLocker("contract")
	})
}

func TestLeaseLockerContract(t *testing.T) {
	t.Parallel()
	lockstest.Run(t, func(t *testing.T) locks.Locker {
		l, err := newLocker(t, newPool(t), nil).LeaseLocker("contract", &pglock.LeaseLockerOpts{TTL: 5 * time.Second})
		must(t, err)
		return l
	})
}

func TestXactLockTx(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	l := newLocker(t, pool, nil).XactLocker("tx")
	ctx := t.Context()
	t.Run("CommitReleases", func(t *testing.T) {
		lock, err := l.Lock(ctx)
		must(t, err)
		tx := lock.(*pglock.XactLock).Tx()
		_, err = tx.Exec(ctx, "CREATE TABLE written (fence bigint)")
		must(t, err)
		must(t, pglock.CheckFenceTx(ctx, tx, "", "written", lock.Fence()))
		must(t, tx.Commit(ctx))
		if cause := context.Cause(lock.Context()); !errors.Is(cause, pglock.ErrReleased) {
			t.Fatalf("cause after Commit = %v, want ErrReleased", cause)
		}
		must(t, lock.Release(ctx)) // after Commit: nothing to do
		next, err := l.TryLock(ctx)
		must(t, err)
		must(t, next.Release(ctx))
	})
	t.Run("ReleaseRollsBack", func(t *testing.T) {
		lock, err := l.Lock(ctx)
		must(t, err)
		_, err = lock.(*pglock.XactLock).Tx().Exec(ctx, "CREATE TABLE rolled_back (x int)")
		must(t, err)
		must(t, lock.Release(ctx))
		var exists bool
		must(t, pool.QueryRow(ctx, "SELECT to_regclass('rolled_back') IS NOT NULL").Scan(&exists))
		if exists {
			t.Fatal("Release committed the lock's transaction")
		}
	})
}

// TestLeaseLockerLost takes a lease over after its expiry was forced: the
// first holder's renewal finds it gone, its context ends with ErrLost, its
// Release says so, and its fenced write is refused after the new holder's.
func TestLeaseLockerLost(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	locker := newLocker(t, pool, nil)
	ctx := t.Context()
	opts := &pglock.LeaseLockerOpts{TTL: 3 * time.Second, RenewInterval: 100 * time.Millisecond, SafetyMargin: 500 * time.Millisecond}
	l, err := locker.LeaseLocker("lost", opts)
	must(t, err)
	old, err := l.TryLock(ctx)
	must(t, err)
	// As if the holder had paused past its lease.
	_, err = pool.Exec(ctx, "UPDATE pgqueue.leases SET expires_at = now() - interval '1 second' WHERE name = 'lost'")
	must(t, err)
	newer, err := l.TryLock(ctx)
	must(t, err)
	defer newer.Release(ctx)
	select {
	case <-old.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("lost lease's context not done")
	}
	if cause := context.Cause(old.Context()); !errors.Is(cause, pglock.ErrLost) {
		t.Fatalf("cause = %v, want ErrLost", cause)
	}
	if err := old.Release(ctx); !errors.Is(err, pglock.ErrLost) {
		t.Fatalf("Release of a lost lease = %v, want ErrLost", err)
	}
	if newer.Fence() <= old.Fence() {
		t.Fatalf("takeover fence %d, want > %d", newer.Fence(), old.Fence())
	}
	fencedWrite := func(token int64) error {
		tx := begin(t, pool)
		if err := locker.CheckFenceTx(ctx, tx, "report", token); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	must(t, fencedWrite(newer.Fence()))
	err = fencedWrite(old.Fence())
	if !errors.Is(err, pglock.ErrStaleFence) || !pgqueue.IsStaleFence(err) {
		t.Fatalf("stale holder's write = %v, want ErrStaleFence", err)
	}
}

func TestCheckFenceTx(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ctx := t.Context()
	check := func(schema string, token int64) error {
		tx := begin(t, pool)
		if err := pglock.CheckFenceTx(ctx, tx, schema, "r", token); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	must(t, check("", 5))
	must(t, check("pgqueue", 5)) // equal tokens pass
	if err := check("", 4); !errors.Is(err, pglock.ErrStaleFence) {
		t.Fatalf("lower token = %v, want ErrStaleFence", err)
	}
	if err := check("Bad-Schema", 9); !errors.Is(err, pglock.ErrInvalidSchema) {
		t.Fatalf("bad schema = %v, want ErrInvalidSchema", err)
	}
	if err := check("other", 9); err == nil || errors.Is(err, pglock.ErrStaleFence) {
		t.Fatalf("missing schema = %v, want a database error that is not ErrStaleFence", err)
	}
}

func TestLeaseLockerOptions(t *testing.T) {
	t.Parallel()
	locker := newLocker(t, newPool(t), nil)
	if _, err := locker.LeaseLocker("x", &pglock.LeaseLockerOpts{TTL: time.Second, RenewInterval: time.Second}); !errors.Is(err, pglock.ErrInvalidOption) {
		t.Fatalf("RenewInterval = TTL: %v, want ErrInvalidOption", err)
	}
}

// TestCheckFenceFileLock fences PostgreSQL writes with a file lock's
// tokens: after the lock file was deleted under its holder and a new holder
// took the new file, the old holder's write is refused.
func TestCheckFenceFileLock(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ctx := t.Context()
	f := filelock.NewFenced(filepath.Join(t.TempDir(), "report.lock"), nil)
	old, err := f.TryLock(ctx)
	must(t, err)
	must(t, os.Remove(old.Name()))
	newer, err := f.TryLock(ctx)
	must(t, err)
	defer newer.Release(ctx)
	must(t, fencetest.FencedWrite(ctx, pool, newer.Fence()))
	if err := fencetest.FencedWrite(ctx, pool, old.Fence()); !errors.Is(err, pglock.ErrStaleFence) {
		t.Fatalf("stale file-lock holder's write = %v, want ErrStaleFence", err)
	}
	_ = old.Release(ctx)
}
