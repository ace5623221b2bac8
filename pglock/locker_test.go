package pglock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/pglock"
)

func TestNew(t *testing.T) {
	t.Parallel()

	t.Run("ErrorIfNilPool", func(t *testing.T) {
		t.Parallel()
		if _, err := pglock.New(nil, nil); !errors.Is(err, pglock.ErrNilPool) {
			t.Fatalf("New(nil): %v, want ErrNilPool", err)
		}
	})

	t.Run("ErrorIfInvalidSchema", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		for _, schema := range []string{"Upper", "1st", "with-dash", "a.b"} {
			_, err := pglock.New(pool, &pglock.Config{Schema: schema})
			if !errors.Is(err, pglock.ErrInvalidSchema) || !errors.Is(err, pgqueue.ErrInvalid) {
				t.Errorf("schema %q: %v, want ErrInvalidSchema (and pgqueue.ErrInvalid)", schema, err)
			}
		}
	})

	t.Run("DefaultSchema", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		for _, cfg := range []*pglock.Config{nil, {}} {
			if got := newLocker(t, pool, cfg).Schema(); got != "pgqueue" {
				t.Errorf("config %+v: schema %q, want pgqueue", cfg, got)
			}
		}
	})

	t.Run("ErrorIfPoolClosed", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		lk := newLocker(t, pool, nil)
		pool.Close()
		_, err := lk.TryLockLease(t.Context(), "cron", "a", time.Second)
		if !errors.Is(err, pglock.ErrClosedPool) || !errors.Is(err, pgqueue.ErrClosedPool) {
			t.Fatalf("TryLockLease on a closed pool: %v, want ErrClosedPool (pgqueue's too)", err)
		}
	})
}
