package pglock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/pglock"
)

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
		skipInShortMode(t, "a lease taken over after expiry")
		ctx := t.Context()
		pool := newPool(t)
		lk := newLocker(t, pool, nil)

		l1, err := lk.TryLockLease(ctx, "cron", "a", time.Second)
		must(t, err)
		if l1.Name() != "cron" || l1.Fence() <= 0 || time.Until(l1.ValidUntil()) > time.Second {
			t.Fatalf("lease %q fence %d valid until %s", l1.Name(), l1.Fence(), l1.ValidUntil())
		}
		for _, holder := range []string{"b", "a"} {
			if _, err := lk.TryLockLease(ctx, "cron", holder, time.Second); !errors.Is(err, pglock.ErrBusy) {
				t.Fatalf("TryLockLease by %s of a held lease: %v, want ErrBusy", holder, err)
			}
		}

		waitLeaseExpired(t, pool, "cron")
		l2, err := lk.TryLockLease(ctx, "cron", "b", time.Second)
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
		if err := l1.Renew(ctx); !errors.Is(err, pglock.ErrLost) {
			t.Fatalf("old holder's Renew: %v, want ErrLost", err)
		}
		if err := l1.Release(ctx); !errors.Is(err, pglock.ErrLost) {
			t.Fatalf("old holder's Release: %v, want ErrLost", err)
		}
		if after := readLease(t, pool, "cron"); after != before {
			t.Fatalf("old holder changed the row: %+v, was %+v", after, before)
		}
		if _, err := lk.TryLockLease(ctx, "cron", "a", time.Second); !errors.Is(err, pglock.ErrBusy) {
			t.Fatalf("old holder re-acquiring a held lease: %v, want ErrBusy", err)
		}
		// The new holder renews.
		must(t, l2.Renew(ctx))
		if after := readLease(t, pool, "cron"); !after.ExpiresAt.After(before.ExpiresAt) || after.Fence != before.Fence {
			t.Fatalf("row after Renew %+v, was %+v", after, before)
		}
	})

	t.Run("ExpiredLeaseCannotBeRenewed", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "an expired lease refused renewal")
		ctx := t.Context()
		pool := newPool(t)
		lk := newLocker(t, pool, nil)
		l, err := lk.TryLockLease(ctx, "cron", "a", time.Second)
		must(t, err)
		waitLeaseExpired(t, pool, "cron")
		// No one took it, but an expired lease may be someone's already.
		if err := l.Renew(ctx); !errors.Is(err, pglock.ErrLost) {
			t.Fatalf("Renew after expiry: %v, want ErrLost", err)
		}
	})

	t.Run("ReleaseFreesAtOnce", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := newPool(t)
		lk := newLocker(t, pool, nil)

		l1, err := lk.TryLockLease(ctx, "cron", "a", time.Minute)
		must(t, err)
		must(t, l1.Release(ctx))
		l2, err := lk.TryLockLease(ctx, "cron", "b", time.Minute)
		if err != nil {
			t.Fatalf("TryLockLease right after Release: %v", err)
		}
		if l2.Fence() <= l1.Fence() {
			t.Fatalf("fence %d after %d, want higher", l2.Fence(), l1.Fence())
		}
		before := readLease(t, pool, "cron")
		if err := l1.Release(ctx); !errors.Is(err, pglock.ErrLost) {
			t.Fatalf("second Release: %v, want ErrLost", err)
		}
		if after := readLease(t, pool, "cron"); after != before {
			t.Fatalf("stale Release changed the row: %+v, was %+v", after, before)
		}
	})

	t.Run("InvalidTTL", func(t *testing.T) {
		t.Parallel()
		lk := newLocker(t, newPool(t), nil)
		if _, err := lk.TryLockLease(t.Context(), "cron", "a", 0); !errors.Is(err, pglock.ErrInvalidOption) {
			t.Fatalf("TryLockLease with ttl 0: %v, want ErrInvalidOption", err)
		}
	})
}
