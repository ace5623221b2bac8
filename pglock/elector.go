package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ElectorConfig configures an Elector. Zero fields take the defaults.
type ElectorConfig struct {
	// Holder names this candidate in the lease row. Default: host name,
	// process id and a random suffix.
	Holder string
	// TTL is the leader's lease. Default 10s.
	TTL time.Duration
	// RenewInterval is how often the leader renews. Default TTL/3.
	RenewInterval time.Duration
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
	l    *Locker
	name string
	cfg  ElectorConfig
	// nudge (capacity 1) makes a follower campaign now; see Nudge.
	nudge chan struct{}
}

// NewElector returns an elector for the lease name. cfg may be nil.
func (l *Locker) NewElector(name string, cfg *ElectorConfig) (*Elector, error) {
	var e ElectorConfig
	if cfg != nil {
		e = *cfg
	}
	if e.Holder == "" {
		e.Holder = defaultHolder()
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
	return &Elector{l: l, name: name, cfg: e, nudge: make(chan struct{}, 1)}, nil
}

// Nudge makes a follower try to take the lease now instead of at its next
// RetryInterval: call it when something run anyway (a poll, a
// notification) showed the lease free. A leader, or an elector not
// running, ignores it; nudges do not queue up beyond one.
func (e *Elector) Nudge() {
	select {
	case e.nudge <- struct{}{}:
	default:
	}
}

// Run campaigns until ctx ends. Each time this candidate becomes leader it
// calls lead with the term and a context that is cancelled, with cause
// ErrLost, when leadership ends: a renewal found the term taken over,
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
		case <-e.nudge:
			retry.Stop()
		}
		lease, err := e.l.TryLockLease(ctx, e.name, e.cfg.Holder, e.cfg.TTL)
		if err == nil {
			e.serve(ctx, lease, lead)
		} else if !errors.Is(err, ErrBusy) && ctx.Err() == nil {
			e.l.log.Error("pglock: leader election failed", "lease", e.name, "err", err)
		}
		retry.Reset(e.cfg.RetryInterval)
	}
}

// serve runs one term.
func (e *Elector) serve(ctx context.Context, lease *LeaseLock, lead func(ctx context.Context, term int64)) {
	e.l.log.InfoContext(ctx, "pglock: leadership gained", "lease", e.name, "holder", e.cfg.Holder, "term", lease.Fence())
	termCtx, end := context.WithCancelCause(ctx)
	lost := func(err error) {
		e.l.log.WarnContext(ctx, "pglock: leadership lost", "lease", e.name, "holder", e.cfg.Holder, "term", lease.Fence(), "err", err)
		end(err)
	}
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
			e.l.log.InfoContext(ctx, "pglock: leadership resigned", "lease", e.name, "holder", e.cfg.Holder, "term", lease.Fence())
			return
		case <-done:
			// lead returned on its own: give the term up.
			end(nil)
			rctx, cancel := context.WithTimeout(ctx, e.cfg.RenewInterval)
			_ = lease.Release(rctx)
			cancel()
			return
		case <-stopAt.C:
			lost(fmt.Errorf("leader %q term %d: lease about to expire unrenewed: %w", e.name, lease.Fence(), ErrLost))
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
			case errors.Is(err, ErrLost):
				lost(err)
				<-done
				return
			case ctx.Err() == nil: // else Run is ending: resign next
				e.l.log.Warn("pglock: leader renewal failed", "lease", e.name, "term", lease.Fence(), "err", err)
			}
		}
	}
}
