package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testdb"
	"github.com/pgqueue/pgqueue/pglock"
)

// exampleDB gives an example a migrated database of its own and a
// function that drops it.
func exampleDB() (*pgxpool.Pool, func()) { return testdb.ExamplePool("pglock_example") }

// A transaction lock is held until its transaction ends. Each acquisition
// draws a fence token higher than every earlier one.
func ExampleLocker_LockXact() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()
	locker, err := pglock.New(pool, nil)
	if err != nil {
		panic(err)
	}

	tx1, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	defer tx1.Rollback(ctx)
	fence1, err := locker.LockXact(ctx, tx1, "nightly-report")
	if err != nil {
		panic(err)
	}
	fmt.Println("first holder, fence", fence1)

	tx2, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	defer tx2.Rollback(ctx)
	_, err = locker.TryLockXact(ctx, tx2, "nightly-report")
	fmt.Println("second, while held: busy:", errors.Is(err, pglock.ErrBusy))

	// ... the report is written in tx1 ...
	if err := tx1.Commit(ctx); err != nil { // releases the lock
		panic(err)
	}
	// A busy answer left tx2 usable: it tries again.
	fence2, err := locker.TryLockXact(ctx, tx2, "nightly-report")
	if err != nil {
		panic(err)
	}
	fmt.Println("second, after the commit, fence", fence2)
	// Output:
	// first holder, fence 1
	// second, while held: busy: true
	// second, after the commit, fence 2
}

// A session lock lives on a connection of its own until Unlock. Run the
// guarded work under its Context.
func ExampleLocker_LockSession() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()
	locker, err := pglock.New(pool, nil)
	if err != nil {
		panic(err)
	}

	lock, err := locker.LockSession(ctx, "reindex", nil)
	if err != nil {
		panic(err)
	}
	_, err = locker.TryLockSession(ctx, "reindex", nil)
	fmt.Println("another session, while held: busy:", errors.Is(err, pglock.ErrBusy))

	// ... work across several transactions under lock.Context(), its
	// writes fenced with lock.Fence() ...

	if err := lock.Unlock(ctx); err != nil {
		panic(err)
	}
	fmt.Println("context after Unlock:", context.Cause(lock.Context()))
	// Output:
	// another session, while held: busy: true
	// context after Unlock: lock released
}

// When the lock's session ends without Unlock (here an administrator ends
// it), the keepalive notices: Lost is closed and Context is cancelled with
// ErrLost.
func ExampleLocker_LockSession_lost() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()
	locker, err := pglock.New(pool, nil)
	if err != nil {
		panic(err)
	}

	lock, err := locker.LockSession(ctx, "reindex", &pglock.SessionLockOpts{KeepaliveInterval: 100 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, `
		SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`); err != nil {
		panic(err)
	}
	<-lock.Lost()
	fmt.Println("context cancelled by ErrLost:", errors.Is(context.Cause(lock.Context()), pglock.ErrLost))
	fmt.Println("Unlock says ErrLost:", errors.Is(lock.Unlock(ctx), pglock.ErrLost))
	// Output:
	// context cancelled by ErrLost: true
	// Unlock says ErrLost: true
}

// A lease lock with a fence token: a takeover after expiry gets a higher
// token, and the old holder can no longer renew.
func ExampleLocker_TryLockLease() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()
	locker, err := pglock.New(pool, nil)
	if err != nil {
		panic(err)
	}

	first, err := locker.TryLockLease(ctx, "nightly-report", "host-a", time.Second)
	if err != nil {
		panic(err)
	}
	_, err = locker.TryLockLease(ctx, "nightly-report", "host-b", time.Second)
	fmt.Println("while held:", err)

	time.Sleep(1100 * time.Millisecond) // host-a stalls past its lease
	second, err := locker.TryLockLease(ctx, "nightly-report", "host-b", time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("takeover has a higher fence:", second.Fence() > first.Fence())
	fmt.Println("old holder renews:", first.Renew(ctx))
	// Output:
	// while held: lease lock "nightly-report": lock busy
	// takeover has a higher fence: true
	// old holder renews: renew lease "nightly-report" fence 1: lock lost
}

// One leader at a time, and a fenced write from an old term is refused
// once a newer term has written.
func ExampleElector_Run() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()
	locker, err := pglock.New(pool, nil)
	if err != nil {
		panic(err)
	}

	if _, err := pool.Exec(ctx, "CREATE TABLE runs (term bigint)"); err != nil {
		panic(err)
	}
	// write is a write made under a term, fenced: check_fence, in the
	// write's transaction, refuses a term lower than one it has seen.
	write := func(ctx context.Context, term int64) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pgqueue.check_fence('scheduler', $1)", term); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO runs VALUES ($1)", term)
			return err
		})
	}
	terms := make(chan int64, 2)
	campaign := func(ctx context.Context, holder string) (done chan struct{}) {
		e, err := locker.NewElector("scheduler", &pglock.ElectorConfig{Holder: holder, TTL: 3 * time.Second, RetryInterval: 100 * time.Millisecond})
		if err != nil {
			panic(err)
		}
		done = make(chan struct{})
		go func() {
			defer close(done)
			e.Run(ctx, func(ctx context.Context, term int64) {
				if err := write(ctx, term); err != nil {
					panic(err)
				}
				terms <- term
				<-ctx.Done() // lead until the term ends
			})
		}()
		return done
	}

	ctxA, stopA := context.WithCancel(ctx)
	doneA := campaign(ctxA, "a")
	termA := <-terms
	fmt.Println("a leads, term", termA)

	ctxB, stopB := context.WithCancel(ctx)
	doneB := campaign(ctxB, "b")
	stopA() // a resigns; b takes over at its next try
	<-doneA
	termB := <-terms
	fmt.Println("b leads, higher term:", termB > termA)

	err = write(ctx, termA) // a, paused, wakes up and writes late
	fmt.Println("a's late write refused:", pgqueue.IsStaleFence(err))
	stopB()
	<-doneB
	// Output:
	// a leads, term 1
	// b leads, higher term: true
	// a's late write refused: true
}

// A lease lock as a locks.Locker renews itself while held; a fenced write
// made with the token of a holder that lost the lease is refused by
// CheckFenceTx, which needs only a transaction and the schema.
func ExampleLocker_LeaseLocker() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()
	locker, err := pglock.New(pool, nil)
	if err != nil {
		panic(err)
	}
	leases, err := locker.LeaseLocker("nightly-report", &pglock.LeaseLockerOpts{TTL: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	lock, err := leases.Lock(ctx)
	if err != nil {
		panic(err)
	}
	defer lock.Release(ctx)

	write := func(fence int64) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if err := pglock.CheckFenceTx(ctx, tx, "pgqueue", "nightly-report", fence); err != nil {
			return err
		}
		// ... the report's writes, in tx ...
		return tx.Commit(ctx)
	}
	fmt.Println("holder writes:", write(lock.Fence()))
	err = write(lock.Fence() - 1) // an earlier holder's token
	fmt.Println("earlier token refused:", errors.Is(err, pglock.ErrStaleFence))
	// Output:
	// holder writes: <nil>
	// earlier token refused: true
}

// The transaction kind as a locks.Locker: the lock's transaction is where
// the guarded work goes; committing it releases the lock.
func ExampleLocker_XactLocker() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()
	locker, err := pglock.New(pool, nil)
	if err != nil {
		panic(err)
	}
	lock, err := locker.XactLocker("nightly-report").Lock(ctx)
	if err != nil {
		panic(err)
	}
	defer lock.Release(ctx) // rolls back unless committed
	tx := lock.(*pglock.XactLock).Tx()
	if err := pglock.CheckFenceTx(ctx, tx, "pgqueue", "nightly-report", lock.Fence()); err != nil {
		panic(err)
	}
	// ... the report's writes, in tx ...
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}
	fmt.Println("after commit:", context.Cause(lock.Context()))
	// Output: after commit: lock released
}
