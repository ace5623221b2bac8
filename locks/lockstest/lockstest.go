// Package lockstest checks that a locks.Locker keeps the contract of
// package locks. Every backend's tests run it, so the backends agree on
// what busy, release, fence tokens and waiting mean; each backend tests
// its own ways of losing a lock on its own (the one that backends with a
// TTL share, a holder paused past its lock's expiry, is written once in
// package pglock/fencetest; HelperCmd starts such tests' child processes).
// It may import package locks and the standard library alone, so that no
// backend is tied to another.
package lockstest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue/locks"
)

// Run runs the contract's tests as subtests of t. newLocker returns a
// Locker on a lock of the test's own, unheld; two acquisitions through it
// must exclude each other.
func Run(t *testing.T, newLocker func(t *testing.T) locks.Locker) {
	t.Run("TryLockBusyWhileHeld", func(t *testing.T) {
		l := newLocker(t)
		a := mustLock(t, l, true)
		if b, err := l.TryLock(t.Context()); !errors.Is(err, locks.ErrBusy) {
			if err == nil {
				_ = b.Release(t.Context())
			}
			t.Fatalf("TryLock while held = %v, want ErrBusy", err)
		}
		mustRelease(t, a)
		b := mustLock(t, l, true)
		if b.Fence() <= a.Fence() {
			t.Errorf("fence after release %d, want > %d", b.Fence(), a.Fence())
		}
		mustRelease(t, b)
	})

	t.Run("FencesIncrease", func(t *testing.T) {
		l := newLocker(t)
		var last int64
		for i := range 5 {
			lock := mustLock(t, l, i%2 == 0)
			if i > 0 && lock.Fence() <= last {
				t.Errorf("acquisition %d: fence %d, want > %d", i, lock.Fence(), last)
			}
			last = lock.Fence()
			mustRelease(t, lock)
		}
	})

	t.Run("ReleaseEndsContext", func(t *testing.T) {
		l := newLocker(t)
		lock := mustLock(t, l, false)
		if err := lock.Context().Err(); err != nil {
			t.Fatalf("context of a held lock: %v", err)
		}
		mustRelease(t, lock)
		select {
		case <-lock.Context().Done():
		default:
			t.Fatal("context not done after Release")
		}
		if cause := context.Cause(lock.Context()); !errors.Is(cause, locks.ErrReleased) {
			t.Errorf("cause after Release = %v, want ErrReleased", cause)
		}
	})

	t.Run("LockWaitsForRelease", func(t *testing.T) {
		l := newLocker(t)
		a := mustLock(t, l, true)
		got := make(chan locks.Lock, 1)
		errc := make(chan error, 1)
		go func() {
			b, err := l.Lock(t.Context())
			if err != nil {
				errc <- err
				return
			}
			got <- b
		}()
		select {
		case b := <-got:
			_ = b.Release(t.Context())
			t.Fatal("Lock returned while another held the lock")
		case err := <-errc:
			t.Fatalf("Lock: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		mustRelease(t, a)
		select {
		case b := <-got:
			if b.Fence() <= a.Fence() {
				t.Errorf("waiter's fence %d, want > %d", b.Fence(), a.Fence())
			}
			mustRelease(t, b)
		case err := <-errc:
			t.Fatalf("Lock: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("waiter not granted the lock 30s after Release")
		}
	})

	t.Run("LockEndsWithContext", func(t *testing.T) {
		l := newLocker(t)
		a := mustLock(t, l, true)
		defer mustRelease(t, a)
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		b, err := l.Lock(ctx)
		if err == nil {
			_ = b.Release(t.Context())
			t.Fatal("Lock acquired a held lock")
		}
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, locks.ErrBusy) {
			t.Fatalf("Lock past its deadline = %v, want DeadlineExceeded and not ErrBusy", err)
		}
	})

	t.Run("MutualExclusion", func(t *testing.T) {
		l := newLocker(t)
		const goroutines, rounds = 8, 5
		var inside atomic.Int32
		var mu sync.Mutex // guards fences: the lock gives no happens-before the race detector sees
		var fences []int64
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		for range goroutines {
			wg.Go(func() {
				for range rounds {
					lock, err := l.Lock(t.Context())
					if err != nil {
						errs <- err
						return
					}
					if n := inside.Add(1); n != 1 {
						errs <- errors.New("two holders at once")
					}
					mu.Lock()
					fences = append(fences, lock.Fence())
					mu.Unlock()
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					if err := lock.Release(t.Context()); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if len(fences) != goroutines*rounds {
			t.Fatalf("%d acquisitions, want %d", len(fences), goroutines*rounds)
		}
		for i := 1; i < len(fences); i++ {
			if fences[i] <= fences[i-1] {
				t.Fatalf("fences out of order in acquisition order: %v", fences)
			}
		}
	})
}

func mustLock(t *testing.T, l locks.Locker, try bool) locks.Lock {
	t.Helper()
	var lock locks.Lock
	var err error
	if try {
		lock, err = l.TryLock(t.Context())
	} else {
		lock, err = l.Lock(t.Context())
	}
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	return lock
}

func mustRelease(t *testing.T, lock locks.Lock) {
	t.Helper()
	if err := lock.Release(context.WithoutCancel(t.Context())); err != nil {
		t.Errorf("Release: %v", err)
	}
}
