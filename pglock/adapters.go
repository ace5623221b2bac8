package pglock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/locks"
)

// The three lock kinds as locks.Locker, so code written against package
// locks can run on PostgreSQL or switch to another backend by changing the
// constructor.
var (
	_ locks.Locker = (*SessionLocker)(nil)
	_ locks.Locker = (*XactLocker)(nil)
	_ locks.Locker = (*LeaseLocker)(nil)
	_ locks.Lock   = (*SessionLock)(nil)
	_ locks.Lock   = (*XactLock)(nil)
	_ locks.Lock   = (*RenewedLease)(nil)
)

// Release is Unlock, under the name package locks uses.
func (l *SessionLock) Release(ctx context.Context) error { return l.Unlock(ctx) }

// SessionLocker is the session lock of one name as a locks.Locker: each
// acquisition is a [SessionLock] on a connection of its own.
type SessionLocker struct {
	l    *Locker
	name string
	opts *SessionLockOpts
}

// SessionLocker returns the locks.Locker of the session lock name. opts may
// be nil.
func (l *Locker) SessionLocker(name string, opts *SessionLockOpts) *SessionLocker {
	return &SessionLocker{l: l, name: name, opts: opts}
}

// Lock is [Locker.LockSession]; the Lock it returns is a *SessionLock.
func (s *SessionLocker) Lock(ctx context.Context) (locks.Lock, error) {
	lock, err := s.l.LockSession(ctx, s.name, s.opts)
	if err != nil {
		return nil, err
	}
	return lock, nil
}

// TryLock is [Locker.TryLockSession]; the Lock it returns is a
// *SessionLock.
func (s *SessionLocker) TryLock(ctx context.Context) (locks.Lock, error) {
	lock, err := s.l.TryLockSession(ctx, s.name, s.opts)
	if err != nil {
		return nil, err
	}
	return lock, nil
}

// XactLocker is the transaction lock of one name as a locks.Locker. Each
// acquisition begins a transaction on the pool and takes the lock on it;
// do the guarded work in [XactLock.Tx] and commit it there.
type XactLocker struct {
	l    *Locker
	name string
}

// XactLocker returns the locks.Locker of the transaction lock name.
func (l *Locker) XactLocker(name string) *XactLocker { return &XactLocker{l: l, name: name} }

// Lock begins a transaction and waits in it, as long as ctx allows, for the
// lock. The Lock it returns is an *XactLock.
func (x *XactLocker) Lock(ctx context.Context) (locks.Lock, error) { return x.lock(ctx, false) }

// TryLock begins a transaction and takes the lock in it if it is free, or
// returns ErrBusy at once. The Lock it returns is an *XactLock.
func (x *XactLocker) TryLock(ctx context.Context) (locks.Lock, error) { return x.lock(ctx, true) }

func (x *XactLocker) lock(ctx context.Context, try bool) (locks.Lock, error) {
	tx, err := x.l.pool.Begin(ctx)
	if err != nil {
		return nil, dbError(fmt.Sprintf("xact lock %q: begin", x.name), err)
	}
	var fence int64
	if try {
		fence, err = x.l.TryLockXact(ctx, tx, x.name)
	} else {
		fence, err = x.l.LockXact(ctx, tx, x.name)
	}
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, err
	}
	lock := &XactLock{name: x.name, fence: fence}
	lock.ctx, lock.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	lock.tx = &xactTx{Tx: tx, lock: lock}
	return lock, nil
}

// XactLock is a transaction lock held by the transaction [XactLock.Tx]:
// it ends when that transaction commits or rolls back. Its context is
// cancelled then, with cause ErrReleased, or ErrLost when the commit
// failed. A transaction whose connection died fails every later statement
// and cannot commit, so its writes need no other signal of the loss.
type XactLock struct {
	name   string
	fence  int64
	tx     *xactTx
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// Name returns the lock's name.
func (x *XactLock) Name() string { return x.name }

// Fence returns the acquisition's token.
func (x *XactLock) Fence() int64 { return x.fence }

// Context is cancelled when the lock's transaction ends.
func (x *XactLock) Context() context.Context { return x.ctx }

// Tx returns the transaction that holds the lock. Do the guarded work in
// it; its Commit and Rollback release the lock.
func (x *XactLock) Tx() pgx.Tx { return x.tx }

// Release rolls the lock's transaction back, unless it was committed or
// rolled back already, which releases the lock.
func (x *XactLock) Release(ctx context.Context) error {
	err := x.tx.Rollback(ctx)
	if errors.Is(err, pgx.ErrTxClosed) {
		return nil
	}
	return err
}

// xactTx is the lock's transaction: its Commit and Rollback end the lock's
// context.
type xactTx struct {
	pgx.Tx
	lock *XactLock
}

func (t *xactTx) Commit(ctx context.Context) error {
	err := t.Tx.Commit(ctx)
	switch {
	case err == nil:
		t.lock.cancel(ErrReleased)
	case errors.Is(err, pgx.ErrTxClosed):
	default:
		// The transaction is gone either way: rolled back by the server
		// (a failed transaction commits as a rollback) or with its
		// connection.
		t.lock.cancel(fmt.Errorf("xact lock %q: commit failed: %w (%w)", t.lock.name, ErrLost, err))
	}
	return err
}

func (t *xactTx) Rollback(ctx context.Context) error {
	err := t.Tx.Rollback(ctx)
	if errors.Is(err, pgx.ErrTxClosed) {
		return err
	}
	// Even a failed rollback ends the transaction: pgx closes the
	// connection, and the server releases the lock with the session.
	t.lock.cancel(ErrReleased)
	if err != nil {
		return dbError(fmt.Sprintf("xact lock %q: rollback", t.lock.name), err)
	}
	return nil
}

// LeaseLockerOpts are options of [Locker.LeaseLocker]. Zero fields take
// the defaults.
type LeaseLockerOpts struct {
	// Holder names the holder in the lease row. Default: host name,
	// process id and a random suffix.
	Holder string
	// TTL is the lease. Default 10s.
	TTL time.Duration
	// RenewInterval is how often a held lease is renewed. Default TTL/3.
	RenewInterval time.Duration
	// SafetyMargin is how long before the lease ends, by this process's
	// monotonic clock, a holder that could not renew counts the lock as
	// lost. Default TTL/5.
	SafetyMargin time.Duration
	// MaxPollInterval bounds the wait between attempts of Lock, which
	// polls: it starts at 10ms and doubles up to this. Default 1s, or
	// TTL/3 when that is shorter.
	MaxPollInterval time.Duration
}

// LeaseLocker is the lease lock of one name as a locks.Locker. Each
// acquisition is renewed in the background until it is released, and its
// context is cancelled with ErrLost when a renewal finds the lease taken
// over or the lease comes within SafetyMargin of its end unrenewed.
type LeaseLocker struct {
	l    *Locker
	name string
	opts LeaseLockerOpts
}

// LeaseLocker returns the locks.Locker of the lease lock name. opts may be
// nil. It returns ErrInvalidOption when the intervals do not fit in the
// TTL.
func (l *Locker) LeaseLocker(name string, opts *LeaseLockerOpts) (*LeaseLocker, error) {
	var o LeaseLockerOpts
	if opts != nil {
		o = *opts
	}
	if o.Holder == "" {
		o.Holder = defaultHolder()
	}
	if o.TTL == 0 {
		o.TTL = 10 * time.Second
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = o.TTL / 3
	}
	if o.SafetyMargin == 0 {
		o.SafetyMargin = o.TTL / 5
	}
	if o.MaxPollInterval == 0 {
		o.MaxPollInterval = min(time.Second, o.TTL/3)
	}
	if o.TTL < 0 || o.RenewInterval <= 0 || o.SafetyMargin < 0 || o.MaxPollInterval <= 0 || o.RenewInterval+o.SafetyMargin >= o.TTL {
		return nil, fmt.Errorf("%w: lease locker needs TTL > RenewInterval + SafetyMargin, got %+v", ErrInvalidOption, o)
	}
	return &LeaseLocker{l: l, name: name, opts: o}, nil
}

// Lock takes the lease, polling while it is held by another, until ctx is
// done. The Lock it returns is a *RenewedLease.
func (x *LeaseLocker) Lock(ctx context.Context) (locks.Lock, error) {
	delay := 10 * time.Millisecond
	for {
		lock, err := x.TryLock(ctx)
		if !errors.Is(err, ErrBusy) {
			return lock, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("lease lock %q: %w", x.name, context.Cause(ctx))
		case <-t.C:
		}
		delay = min(2*delay, x.opts.MaxPollInterval)
	}
}

// TryLock takes the lease if it is free or expired, or returns ErrBusy at
// once. The Lock it returns is a *RenewedLease.
func (x *LeaseLocker) TryLock(ctx context.Context) (locks.Lock, error) {
	lease, err := x.l.TryLockLease(ctx, x.name, x.opts.Holder, x.opts.TTL)
	if err != nil {
		return nil, err
	}
	r := &RenewedLease{lease: lease, opts: x.opts, log: x.l.log, stop: make(chan struct{}), done: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	go r.renew()
	return r, nil
}

// RenewedLease is a [LeaseLock] renewed in the background until Release.
type RenewedLease struct {
	lease  *LeaseLock
	opts   LeaseLockerOpts
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{} // closed by Release
	done   chan struct{} // closed when renew returns
	once   sync.Once
}

// Name returns the lock's name.
func (r *RenewedLease) Name() string { return r.lease.Name() }

// Fence returns the acquisition's token.
func (r *RenewedLease) Fence() int64 { return r.lease.Fence() }

// Context is cancelled when the lease is lost (cause wraps ErrLost) or
// released (cause ErrReleased).
func (r *RenewedLease) Context() context.Context { return r.ctx }

// renew keeps the lease until Release, or until it is lost.
func (r *RenewedLease) renew() {
	defer close(r.done)
	what := fmt.Sprintf("lease lock %q fence %d", r.lease.Name(), r.lease.Fence())
	locks.KeepRenewed(r.ctx, r.stop, what, r.lease.ValidUntil(), r.opts.RenewInterval, r.opts.SafetyMargin,
		func(ctx context.Context) (time.Time, error) {
			if err := r.lease.Renew(ctx); err != nil {
				return time.Time{}, err
			}
			return r.lease.ValidUntil(), nil
		}, r.lost)
}

// lost ends the lock's context with err, which wraps ErrLost.
func (r *RenewedLease) lost(err error) {
	r.log.Warn("pglock: lease lock lost", "lease", r.lease.Name(), "fence", r.lease.Fence(), "err", err)
	r.cancel(err)
}

// Release stops the renewals and ends the lease at once so another holder
// can take it. It returns ErrLost when the lease was lost first.
func (r *RenewedLease) Release(ctx context.Context) error {
	first := false
	r.once.Do(func() { close(r.stop); first = true })
	<-r.done
	if !first {
		return fmt.Errorf("lease lock %q: %w", r.lease.Name(), ErrNotLocked)
	}
	if cause := context.Cause(r.ctx); cause != nil {
		// The lease may still be ours in the table (the renewals only
		// failed to get through): free it if so; the fence guards it.
		_ = r.lease.Release(ctx)
		return cause
	}
	defer r.cancel(ErrReleased)
	return r.lease.Release(ctx)
}
