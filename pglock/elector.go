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

	// SessionFailover makes the leader hold its leadership also as a
	// session advisory lock, on a connection the elector dials for it
	// (Config.DirectConnConfig, else the pool's configuration) and keeps
	// for its Run. Followers try that lock every SessionInterval on a
	// connection of their own: getting it proves that no leader's session
	// is alive (its process was killed, its connection cut or its backend
	// terminated), so the follower takes the lease over at once with a new
	// term instead of waiting up to TTL for it to expire. A leader that is
	// alive but stuck keeps its session, and its lease's expiry replaces
	// it as before. A leader that finds its session gone ends its term
	// (cause ErrLost): any follower may have taken over already. Costs one
	// connection per elector. Behind a pooler without DirectConnConfig the
	// elector says so once and keeps to the lease alone. Default false.
	SessionFailover bool
	// SessionInterval is how often, with SessionFailover, a follower tries
	// the session lock and a leader checks that its session still holds
	// it. Default TTL/20.
	SessionInterval time.Duration
	// SessionTimeout is how long, with SessionFailover, a leader's check
	// of its session may wait for the server's answer. The check runs
	// beside the renewals, so a slow answer (a loaded server or machine)
	// holds nothing up and ends nothing; one that does not come in this
	// time means the server or the network hangs: the connection is
	// closed, which ends the session and its lock, and with them the
	// term (cause ErrLost). Default DefaultKeepaliveTimeout, and never
	// less than SessionInterval.
	SessionTimeout time.Duration
}

// Elector runs leader election on a lease lock: the term is the lease's
// fence. A stale leader can neither renew nor resign a newer term.
type Elector struct {
	l    *Locker
	name string
	cfg  ElectorConfig
	q    electorQueries
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
	if e.SessionInterval == 0 {
		e.SessionInterval = e.TTL / 20
	}
	if e.SessionTimeout <= 0 {
		e.SessionTimeout = DefaultKeepaliveTimeout
	}
	e.SessionTimeout = max(e.SessionTimeout, e.SessionInterval)
	if e.TTL < 0 || e.RenewInterval <= 0 || e.RetryInterval <= 0 || e.SafetyMargin < 0 || e.RenewInterval+e.SafetyMargin >= e.TTL {
		return nil, fmt.Errorf("%w: elector needs TTL > RenewInterval + SafetyMargin, got %+v", ErrInvalidOption, e)
	}
	if e.SessionInterval <= 0 {
		return nil, fmt.Errorf("%w: elector needs a positive SessionInterval, got %s", ErrInvalidOption, e.SessionInterval)
	}
	q, err := loadElectorQueries(l.schema)
	if err != nil {
		return nil, err
	}
	return &Elector{l: l, name: name, cfg: e, q: q, nudge: make(chan struct{}, 1)}, nil
}

// SessionKey returns the advisory key of the election's session lock (see
// ElectorConfig.SessionFailover), as pg_locks shows it: the Locker's key
// of "pglock:elector:" and the lease's name.
func (e *Elector) SessionKey() Key { return e.l.Key(ElectorSessionLock(e.name)) }

// ElectorSessionLock returns the name of the session lock an election of
// lease holds with ElectorConfig.SessionFailover: its key is the
// Locker's Key of that name. Tools that list advisory locks use it to
// name them.
func ElectorSessionLock(lease string) string { return electorLockPrefix + lease }

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
// the lease came within SafetyMargin of its end without a successful
// renewal, or (with SessionFailover) the leader's session was found gone.
// lead must return promptly once its context is done; Run waits for it
// before campaigning again, and resigns the term when ctx ends.
// A campaign that fails (the database down, the schema's tables gone) is
// logged once, at Error; the next campaigns wait longer each time (up to
// 30 s, or RetryInterval when longer), and the first that works again is
// logged at Info.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context, term int64)) {
	var s *electorSession
	var tries <-chan time.Time
	if e.cfg.SessionFailover {
		s = newElectorSession(e.l, e.name, &e.q, min(e.cfg.RetryInterval, e.cfg.TTL))
		defer s.drop(ctx)
		t := time.NewTicker(e.cfg.SessionInterval)
		defer t.Stop()
		tries = t.C
	}
	retry := time.NewTimer(0)
	defer retry.Stop()
	var failing campaignFailures
	for {
		select {
		case <-ctx.Done():
			return
		case <-retry.C:
		case <-e.nudge:
			retry.Stop()
		case <-tries:
			// One quick statement on the pinned connection; the lease is
			// touched only once the lock showed the leader's session gone.
			if time.Now().Before(s.quietUntil) {
				continue
			}
			s.dial(ctx, e.cfg.RenewInterval)
			if got, err := s.tryLock(ctx, e.cfg.RenewInterval); !got {
				if err != nil && ctx.Err() == nil {
					e.l.log.Warn("pglock: elector session lock failed", "lease", e.name, "err", err)
				}
				continue
			}
		}
		lease, err := e.campaign(ctx, s)
		switch {
		case err == nil:
			failing.ended(ctx, e)
			e.serve(ctx, lease, s, lead)
		case errors.Is(err, ErrBusy):
			failing.ended(ctx, e)
		case ctx.Err() == nil:
			failing.failed(ctx, e, err)
		}
		retry.Reset(failing.wait(e.cfg.RetryInterval))
	}
}

// campaignFailures follows a run of failed campaigns (the database down,
// the leases table dropped): the first is logged, the next ones wait
// longer each time (RetryInterval doubling up to campaignBackoffMax, or
// RetryInterval when longer), and the first campaign that works again
// says how many failed. A campaign failing every RetryInterval logged an
// ERROR each time.
type campaignFailures struct {
	n     int
	since time.Time
}

// campaignBackoffMax bounds the wait between failed campaigns.
const campaignBackoffMax = 30 * time.Second

func (f *campaignFailures) failed(ctx context.Context, e *Elector, err error) {
	f.n++
	if f.n == 1 {
		f.since = time.Now()
		e.l.log.ErrorContext(ctx, "pglock: leader election failed; trying again less often until it works", "lease", e.name, "err", err)
	}
}

func (f *campaignFailures) ended(ctx context.Context, e *Elector) {
	if f.n == 0 {
		return
	}
	e.l.log.InfoContext(ctx, "pglock: leader election works again", "lease", e.name, "failures", f.n,
		"for", time.Since(f.since).Round(time.Millisecond))
	f.n = 0
}

// wait returns the wait before the next campaign.
func (f *campaignFailures) wait(retry time.Duration) time.Duration {
	d := retry
	for i := 1; i < f.n && d < campaignBackoffMax; i++ {
		d *= 2
	}
	return min(d, max(retry, campaignBackoffMax))
}

// campaign tries to take the lease once. With a session that holds (or
// now gets) the election's lock, it takes the lease over whoever held it;
// else only once the last holder's lease expired.
func (e *Elector) campaign(ctx context.Context, s *electorSession) (*LeaseLock, error) {
	if s == nil {
		return e.l.TryLockLease(ctx, e.name, e.cfg.Holder, e.cfg.TTL)
	}
	if s.dial(ctx, e.cfg.RenewInterval) {
		if _, err := s.tryLock(ctx, e.cfg.RenewInterval); err != nil && ctx.Err() == nil {
			e.l.log.Warn("pglock: elector session lock failed", "lease", e.name, "err", err)
		}
	}
	if !s.held() {
		// A session holds the lock: a live leader, or one that is stuck
		// and whose lease may have expired.
		return e.l.TryLockLease(ctx, e.name, e.cfg.Holder, e.cfg.TTL)
	}
	lease, from, err := e.takeover(ctx, s)
	if err != nil {
		// Not ours to keep: a live leader on the lease alone needs it to
		// record its term; leave it the lock for a while.
		s.unlock(ctx, e.cfg.RenewInterval)
		if errors.Is(err, ErrBusy) {
			s.quietUntil = time.Now().Add(e.cfg.RenewInterval)
		}
		return nil, err
	}
	if from.valid != nil && *from.valid {
		e.l.log.InfoContext(ctx, "pglock: the leader's session ended: lease taken over before its expiry",
			"lease", e.name, "holder", e.cfg.Holder, "term", lease.Fence(), "from_holder", *from.holder, "from_term", *from.fence)
	}
	return lease, nil
}

// serve runs one term.
func (e *Elector) serve(ctx context.Context, lease *LeaseLock, s *electorSession, lead func(ctx context.Context, term int64)) {
	e.l.log.InfoContext(ctx, "pglock: leadership gained", "lease", e.name, "holder", e.cfg.Holder, "term", lease.Fence(),
		"session", s != nil && s.held())
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
	// A statement that hangs must not hold this loop past the time to
	// stop acting.
	bounded := func() (context.Context, context.CancelFunc) {
		deadline := time.Now().Add(e.cfg.RenewInterval)
		if stop := lease.ValidUntil().Add(-e.cfg.SafetyMargin); stop.Before(deadline) {
			deadline = stop
		}
		return context.WithDeadline(ctx, deadline)
	}
	var checks <-chan time.Time
	// marked: this term is recorded as held by the session too (a
	// takeover records its own term).
	marked := s != nil && s.held()
	// checked receives the answer of the session check in flight, if
	// any: the check runs in a goroutine of its own, bounded by
	// SessionTimeout, so that a slow answer neither ends the term nor
	// holds the renewals back. The session is touched by one goroutine
	// at a time: this loop starts no other use of it while a check runs.
	var checked chan error
	checkCtx, stopCheck := context.WithCancel(ctx)
	if s != nil {
		t := time.NewTicker(e.cfg.SessionInterval)
		defer t.Stop()
		checks = t.C
		// Deferred, so after the resign: a follower that gets the lock
		// then finds the lease free or takes it over, either way at once.
		defer s.unlock(ctx, e.cfg.RenewInterval)
	}
	// Before the unlock: a check still waiting is cut short (which closes
	// its connection, ending the session) and waited for.
	defer func() {
		stopCheck()
		if checked != nil {
			<-checked
		}
	}()
	// takeSession is for a leader on the lease alone: the lock was busy
	// when the term began (a stuck leader's session, or a candidate about
	// to find this term live) or the session was down. It takes the lock
	// if free and records the term as held by a session: from then on the
	// session's end hands the term over. It reports whether it did.
	takeSession := func() bool {
		cctx, cancel := bounded()
		defer cancel()
		s.dial(cctx, e.cfg.RenewInterval)
		if got, _ := s.tryLock(cctx, e.cfg.RenewInterval); !got {
			return false
		}
		ok, err := s.mark(cctx, e.name, lease.Fence())
		if err != nil && ctx.Err() == nil {
			e.l.log.Warn("pglock: elector session lock failed", "lease", e.name, "err", err)
		}
		return ok
	}
	if s != nil && !marked {
		marked = takeSession()
	}
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
		case <-checks:
			if !marked {
				marked = takeSession()
				continue
			}
			if checked != nil {
				continue // the last check still waits for its answer
			}
			answer := make(chan error, 1)
			checked = answer
			go func() { answer <- s.check(checkCtx, e.cfg.SessionTimeout) }()
		case err := <-checked:
			checked = nil
			if err != nil && ctx.Err() == nil {
				// Any follower may take the lease over from now on: stop
				// rather than race it. The term is resigned and Run
				// campaigns again, with a new session.
				lost(fmt.Errorf("leader %q term %d: its session ended: %w (%w)", e.name, lease.Fence(), ErrLost, err))
				<-done
				rctx, cancel := context.WithTimeout(ctx, e.cfg.RenewInterval)
				_ = lease.Release(rctx)
				cancel()
				return
			}
		case <-renew.C:
			rctx, cancel := bounded()
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
