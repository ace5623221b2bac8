package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// LeaseLock is a lease lock: a row in <schema>.leases naming its holder, its
// fence and its expiry. Acquire, renew and release are each one
// conditional statement and keep no session state, so lease locks work
// through PgBouncer in transaction mode, where session advisory locks do
// not.
//
// A lease is only as good as its holder's discipline: stop acting before
// ValidUntil, and fence the writes made under it with Fence, since a holder
// that pauses past its expiry is not stopped by anything else.
type LeaseLock struct {
	l      *Locker
	name   string
	holder string
	ttl    time.Duration
	fence  int64
	// validUntil is by this process's monotonic clock: the time the
	// acquire or last renew was sent, plus ttl. The database's expiry is
	// no earlier.
	validUntil time.Time
}

// TryLockLease takes the lease lock name for holder for ttl, if it is free
// or its last holder's lease expired, or returns ErrBusy at once. Each
// acquisition gets a fence higher than every earlier one.
func (l *Locker) TryLockLease(ctx context.Context, name, holder string, ttl time.Duration) (*LeaseLock, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("%w: lease ttl must be positive, got %s", ErrInvalidOption, ttl)
	}
	sent := time.Now()
	var fence int64
	err := l.pool.QueryRow(ctx, l.q.leaseAcquire, name, holder, ttl.Microseconds()).Scan(&fence)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("lease lock %q: %w", name, ErrBusy)
	}
	if err != nil {
		return nil, dbError(fmt.Sprintf("lease lock %q", name), err)
	}
	return &LeaseLock{l: l, name: name, holder: holder, ttl: ttl, fence: fence, validUntil: sent.Add(ttl)}, nil
}

// Name returns the lock's name.
func (l *LeaseLock) Name() string { return l.name }

// Fence returns the acquisition's token.
func (l *LeaseLock) Fence() int64 { return l.fence }

// ValidUntil returns when the lease ends by this process's clock unless
// renewed. The database's expiry is no earlier; it is the latest moment to
// stop acting.
func (l *LeaseLock) ValidUntil() time.Time { return l.validUntil }

// Renew extends the lease by its ttl from now, by the database clock. It
// returns ErrLost when the lease expired or was taken over: stop
// acting at once.
func (l *LeaseLock) Renew(ctx context.Context) error {
	sent := time.Now()
	tag, err := l.l.pool.Exec(ctx, l.l.q.leaseRenew, l.name, l.fence, l.ttl.Microseconds())
	if err != nil {
		return dbError(fmt.Sprintf("renew lease %q", l.name), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("renew lease %q fence %d: %w", l.name, l.fence, ErrLost)
	}
	l.validUntil = sent.Add(l.ttl)
	return nil
}

// Release ends the lease at once so another holder can take it. From a
// fence that no longer holds the lease it changes nothing and returns
// ErrLost.
func (l *LeaseLock) Release(ctx context.Context) error {
	tag, err := l.l.pool.Exec(ctx, l.l.q.leaseRelease, l.name, l.fence)
	if err != nil {
		return dbError(fmt.Sprintf("release lease %q", l.name), err)
	}
	l.validUntil = time.Time{}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("release lease %q fence %d: %w", l.name, l.fence, ErrLost)
	}
	return nil
}
