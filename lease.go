package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Lease is a lease lock: a row in <schema>.leases naming its holder, its
// fence and its expiry. Acquire, renew and release are each one
// conditional statement and keep no session state, so lease locks work
// through PgBouncer in transaction mode, where session advisory locks do
// not.
//
// A lease is only as good as its holder's discipline: stop acting before
// ValidUntil, and fence the writes made under it with Fence, since a holder
// that pauses past its expiry is not stopped by anything else.
type Lease struct {
	c      *Client
	name   string
	holder string
	ttl    time.Duration
	fence  int64
	// validUntil is by this process's monotonic clock: the time the
	// acquire or last renew was sent, plus ttl. The database's expiry is
	// no earlier.
	validUntil time.Time
}

// AcquireLease takes the lease lock name for holder for ttl, if it is free
// or its last holder's lease expired, or returns ErrLockBusy. Each
// acquisition gets a fence higher than every earlier one.
func (c *Client) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (*Lease, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("%w: lease ttl must be positive, got %s", ErrInvalidOption, ttl)
	}
	sent := time.Now()
	var fence int64
	err := c.pool.QueryRow(ctx, c.q.leaseAcquire, name, holder, ttl.Microseconds()).Scan(&fence)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("lease %q: %w", name, ErrLockBusy)
	}
	if err != nil {
		return nil, dbError(fmt.Sprintf("acquire lease %q", name), err)
	}
	return &Lease{c: c, name: name, holder: holder, ttl: ttl, fence: fence, validUntil: sent.Add(ttl)}, nil
}

// Name returns the lease's name.
func (l *Lease) Name() string { return l.name }

// Fence returns the acquisition's token.
func (l *Lease) Fence() int64 { return l.fence }

// ValidUntil returns when the lease ends by this process's clock unless
// renewed. The database's expiry is no earlier; it is the latest moment to
// stop acting.
func (l *Lease) ValidUntil() time.Time { return l.validUntil }

// Renew extends the lease by its ttl from now, by the database clock. It
// returns ErrLockLost when the lease expired or was taken over: stop
// acting at once.
func (l *Lease) Renew(ctx context.Context) error {
	sent := time.Now()
	tag, err := l.c.pool.Exec(ctx, l.c.q.leaseRenew, l.name, l.fence, l.ttl.Microseconds())
	if err != nil {
		return dbError(fmt.Sprintf("renew lease %q", l.name), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("renew lease %q fence %d: %w", l.name, l.fence, ErrLockLost)
	}
	l.validUntil = sent.Add(l.ttl)
	return nil
}

// Release ends the lease at once so another holder can take it. From a
// fence that no longer holds the lease it changes nothing and returns
// ErrLockLost.
func (l *Lease) Release(ctx context.Context) error {
	tag, err := l.c.pool.Exec(ctx, l.c.q.leaseRelease, l.name, l.fence)
	if err != nil {
		return dbError(fmt.Sprintf("release lease %q", l.name), err)
	}
	l.validUntil = time.Time{}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("release lease %q fence %d: %w", l.name, l.fence, ErrLockLost)
	}
	return nil
}

// ElectorConfig configures an Elector. Zero fields take the defaults.
type ElectorConfig struct {
	// Holder names this candidate in the lease row. Default: the client ID.
	Holder string
	// TTL is the leader's lease. Default 10s.
	TTL time.Duration
	// RenewInterval is how often the leader renews. Default TTL/3.
	RenewInterval time.Duration
	// Wake, when set, makes a follower try to take the lease as soon as it
	// receives from it (say, when a query it runs anyway found the lease
	// free), besides every RetryInterval.
	Wake <-chan struct{}
	// RetryInterval is how often a follower tries to take the lease.
	// Default TTL/3.
	RetryInterval time.Duration
	// SafetyMargin is how long before its lease ends, by its own monotonic
	// clock, a leader that could not renew stops acting. Default TTL/5.
	SafetyMargin time.Duration
}

// Elector runs leader election on a lease lock: the term is the lease's
// fence. A stale leader can neither renew nor resign a newer term.
type Elector struct {
	c    *Client
	name string
	cfg  ElectorConfig
}

// NewElector returns an elector for the lease name. cfg may be nil.
func (c *Client) NewElector(name string, cfg *ElectorConfig) (*Elector, error) {
	var e ElectorConfig
	if cfg != nil {
		e = *cfg
	}
	if e.Holder == "" {
		e.Holder = c.config.ID
	}
	if e.TTL == 0 {
		e.TTL = 10 * time.Second
	}
	if e.RenewInterval == 0 {
		e.RenewInterval = e.TTL / 3
	}
	if e.RetryInterval == 0 {
		e.RetryInterval = e.TTL / 3
	}
	if e.SafetyMargin == 0 {
		e.SafetyMargin = e.TTL / 5
	}
	if e.TTL < 0 || e.RenewInterval <= 0 || e.RetryInterval <= 0 || e.SafetyMargin < 0 || e.RenewInterval+e.SafetyMargin >= e.TTL {
		return nil, fmt.Errorf("%w: elector needs TTL > RenewInterval + SafetyMargin, got %+v", ErrInvalidOption, e)
	}
	return &Elector{c: c, name: name, cfg: e}, nil
}

// Run campaigns until ctx ends. Each time this candidate becomes leader it
// calls lead with the term and a context that is cancelled, with cause
// ErrLockLost, when leadership ends: a renewal found the term taken over,
// or the lease came within SafetyMargin of its end without a successful
// renewal. lead must return promptly once its context is done; Run waits
// for it before campaigning again, and resigns the term when ctx ends.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context, term int64)) {
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-retry.C:
		case <-e.cfg.Wake:
			retry.Stop()
		}
		lease, err := e.c.AcquireLease(ctx, e.name, e.cfg.Holder, e.cfg.TTL)
		if err == nil {
			e.serve(ctx, lease, lead)
		} else if !errors.Is(err, ErrLockBusy) && ctx.Err() == nil {
			e.c.log.Error("pgqueue: leader election failed", "lease", e.name, "err", err)
		}
		retry.Reset(e.cfg.RetryInterval)
	}
}

// serve runs one term.
func (e *Elector) serve(ctx context.Context, lease *Lease, lead func(ctx context.Context, term int64)) {
	termCtx, end := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(termCtx, lease.Fence())
	}()
	renew := time.NewTicker(e.cfg.RenewInterval)
	defer renew.Stop()
	// stopAt is when this leader must stop acting if no renewal succeeds.
	stopAt := time.NewTimer(time.Until(lease.ValidUntil().Add(-e.cfg.SafetyMargin)))
	defer stopAt.Stop()
	for {
		select {
		case <-ctx.Done():
			end(context.Cause(ctx))
			<-done
			// Resign so a successor need not wait for the lease to expire.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.RenewInterval)
			_ = lease.Release(rctx)
			cancel()
			return
		case <-done:
			// lead returned on its own: give the term up.
			end(nil)
			rctx, cancel := context.WithTimeout(ctx, e.cfg.RenewInterval)
			_ = lease.Release(rctx)
			cancel()
			return
		case <-stopAt.C:
			end(fmt.Errorf("leader %q term %d: lease about to expire unrenewed: %w", e.name, lease.Fence(), ErrLockLost))
			<-done
			return
		case <-renew.C:
			// A renewal that hangs must not hold this loop past the time
			// to stop acting.
			deadline := time.Now().Add(e.cfg.RenewInterval)
			if stop := lease.ValidUntil().Add(-e.cfg.SafetyMargin); stop.Before(deadline) {
				deadline = stop
			}
			rctx, cancel := context.WithDeadline(ctx, deadline)
			err := lease.Renew(rctx)
			cancel()
			switch {
			case err == nil:
				stopAt.Reset(time.Until(lease.ValidUntil().Add(-e.cfg.SafetyMargin)))
			case errors.Is(err, ErrLockLost):
				end(err)
				<-done
				return
			case ctx.Err() == nil: // else Run is ending: resign next
				e.c.log.Warn("pgqueue: leader renewal failed", "lease", e.name, "term", lease.Fence(), "err", err)
			}
		}
	}
}
