package pglock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgqueue/pgqueue/pglock"
)

func TestXactLock(t *testing.T) {
	t.Parallel()

	t.Run("TryIsBusyUntilCommit", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := newPool(t)
		lk := newLocker(t, pool, nil)

		tx1 := begin(t, pool)
		f1, err := lk.TryLockXact(ctx, tx1, "report")
		must(t, err)
		tx2 := begin(t, pool)
		if _, err := lk.TryLockXact(ctx, tx2, "report"); !errors.Is(err, pglock.ErrBusy) {
			t.Fatalf("second TryLockXact: %v, want ErrBusy", err)
		}
		// Another name is another lock.
		if _, err := lk.TryLockXact(ctx, tx2, "other report"); err != nil {
			t.Fatalf("TryLockXact of another name: %v", err)
		}
		must(t, tx1.Commit(ctx))
		// A busy answer does not abort tx2: it can try again in the same
		// transaction once the holder is gone.
		f2, err := lk.TryLockXact(ctx, tx2, "report")
		if err != nil {
			t.Fatalf("TryLockXact after the holder committed: %v", err)
		}
		if f2 <= f1 {
			t.Fatalf("fence %d after %d, want higher", f2, f1)
		}
		must(t, tx2.Rollback(ctx))
		tx3 := begin(t, pool)
		if _, err := lk.TryLockXact(ctx, tx3, "report"); err != nil {
			t.Fatalf("TryLockXact after the holder rolled back: %v", err)
		}
	})

	t.Run("WaitsForTheHolder", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := newPool(t)
		lk := newLocker(t, pool, nil)

		tx1 := begin(t, pool)
		f1, err := lk.LockXact(ctx, tx1, "report")
		must(t, err)
		tx2 := begin(t, pool)
		type result struct {
			fence int64
			err   error
		}
		got := make(chan result, 1)
		go func() {
			f, err := lk.LockXact(ctx, tx2, "report")
			got <- result{f, err}
		}()
		waitFor(t, "the second transaction to wait for the lock", func() bool {
			return len(advisoryHolders(t, pool, lk.Key("report"), false)) == 1
		})
		select {
		case r := <-got:
			t.Fatalf("LockXact returned while the lock was held: %+v", r)
		case <-time.After(100 * time.Millisecond):
		}
		must(t, tx1.Commit(ctx))
		select {
		case r := <-got:
			if r.err != nil {
				t.Fatalf("LockXact after the holder committed: %v", r.err)
			}
			if r.fence <= f1 {
				t.Fatalf("fence %d after %d, want higher", r.fence, f1)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("LockXact still waiting 5s after the holder committed")
		}
	})

	t.Run("WaitEndsWithContext", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a lock wait ending with its context")
		ctx := t.Context()
		pool := newPool(t)
		lk := newLocker(t, pool, nil)
		k := lk.Key("report")

		holder := begin(t, pool)
		_, err := lk.LockXact(ctx, holder, "report")
		must(t, err)

		// A deadline: pgx gives up on the connection (closing it, which
		// ends the server's wait) and reports the context's error.
		tx := begin(t, pool)
		dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err = lk.LockXact(dctx, tx, "report")
		took := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) || !pgconn.Timeout(err) {
			t.Fatalf("LockXact past its deadline: %v, want context.DeadlineExceeded (a pgconn timeout)", err)
		}
		if took < 150*time.Millisecond || took > 5*time.Second {
			t.Fatalf("LockXact gave up after %s, want about 200ms", took)
		}

		// A cancellation.
		tx = begin(t, pool)
		cctx, cancelWait := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancelWait)
		if _, err := lk.LockXact(cctx, tx, "report"); !errors.Is(err, context.Canceled) {
			t.Fatalf("LockXact cancelled: %v, want context.Canceled", err)
		}

		// Neither wait is left behind on the server, where it could still
		// be granted the lock once the holder commits.
		if pids := advisoryHolders(t, pool, k, false); len(pids) != 0 {
			t.Fatalf("backends %v still wait for the lock after LockXact returned", pids)
		}
		must(t, holder.Commit(ctx))
		tx = begin(t, pool)
		if _, err := lk.TryLockXact(ctx, tx, "report"); err != nil {
			t.Fatalf("TryLockXact after every holder and waiter left: %v", err)
		}
	})

	t.Run("FencesIncreaseWithEachAcquisition", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "fences increasing with each acquisition")
		ctx := t.Context()
		pool := newPool(t)
		lk := newLocker(t, pool, nil)

		// Sixteen transactions queue on one name; each records its fence
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
					f, err = lk.TryLockXact(ctx, tx, "report")
					if errors.Is(err, pglock.ErrBusy) {
						f, err = lk.LockXact(ctx, tx, "report")
					}
				} else {
					f, err = lk.LockXact(ctx, tx, "report")
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
