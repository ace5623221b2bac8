package pglock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/pgsession"
)

// SessionLock is an advisory lock held by the session of a connection of
// its own. The connection is dialled for the lock and never shared, so the
// unlock always reaches the session that holds the lock: a pool could hand
// it to another. A keepalive notices the connection's death; then Lost is
// closed and Context is cancelled with ErrLost.
type SessionLock struct {
	name  string
	key   Key
	fence int64
	q     *queries

	mu      sync.Mutex // serialises use of conn
	conn    *pgx.Conn
	pid     int32  // the backend that holds the lock
	release func() // the process-local guard (acquireGuard)

	ctx      context.Context
	cancel   context.CancelCauseFunc
	lost     chan struct{}
	once     sync.Once // closes lost
	stop     chan struct{}
	stopOnce sync.Once // Unlock closes stop once, even when called twice at once
	wg       sync.WaitGroup
}

// SessionLockOpts are options of LockSession and TryLockSession.
type SessionLockOpts struct {
	// KeepaliveInterval is how often the connection is checked. Default 1s.
	KeepaliveInterval time.Duration
	// KeepaliveTimeout is how long one check may wait for the server's
	// answer before the lock is called lost. A session lock ends only with
	// its backend, so a check that is merely slow (a loaded server or
	// machine) must not end it; one that gets no answer in this time
	// means the server or the network hangs, and the lock may be gone.
	// Default 5s, and never less than KeepaliveInterval.
	KeepaliveTimeout time.Duration
}

// DefaultKeepaliveTimeout is SessionLockOpts.KeepaliveTimeout's default.
const DefaultKeepaliveTimeout = 5 * time.Second

// LockSession waits, as long as ctx allows, for the advisory lock of name
// on a connection dialled for it with the pool's configuration, and returns
// it held. Release it with Unlock. opts may be nil.
//
// The connection is dialled with Config.DirectConnConfig, else with the
// pool's configuration, and must reach PostgreSQL itself: LockSession
// returns ErrNoSessionAffinity, every time, when it goes through a pooler
// (PgBouncer in any mode). Behind a pooler, set Config.DirectConnConfig or
// use lease locks. Within one process, two holders of one name wait for
// each other whatever their connections: a session lock is re-entrant
// within one database session, so this does not rely on the server alone.
func (l *Locker) LockSession(ctx context.Context, name string, opts *SessionLockOpts) (*SessionLock, error) {
	return l.sessionLock(ctx, name, opts, false)
}

// TryLockSession is LockSession without waiting: ErrBusy when another
// session holds the lock.
func (l *Locker) TryLockSession(ctx context.Context, name string, opts *SessionLockOpts) (*SessionLock, error) {
	return l.sessionLock(ctx, name, opts, true)
}

func (l *Locker) sessionLock(ctx context.Context, name string, opts *SessionLockOpts, try bool) (_ *SessionLock, err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("pglock: session lock %q: %w", name, err)
	}
	if opts == nil {
		opts = &SessionLockOpts{}
	}
	interval := opts.KeepaliveInterval
	if interval <= 0 {
		interval = time.Second
	}
	timeout := opts.KeepaliveTimeout
	if timeout <= 0 {
		timeout = DefaultKeepaliveTimeout
	}
	timeout = max(timeout, interval)
	cfg := l.sessionConnConfig()
	k := l.Key(name)
	if try && guardHeld(newGuardKey(cfg, k)) {
		// Held in this process, on a connection that passed the probe
		// with this configuration: busy, without dialing a session (a
		// backend forked) only to be told so.
		return nil, fmt.Errorf("session lock %q: %w (held in this process)", name, ErrBusy)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, dbError(fmt.Sprintf("session lock %q: connect", name), err)
	}
	defer func() {
		if err != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
			awaitServerSide(conn.PgConn())
		}
	}()
	pid, err := probeSessionAffinity(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("session lock %q: %w", name, err)
	}
	// The guard after the probe, so that behind a pooler every call says
	// ErrNoSessionAffinity, not ErrBusy for a neighbour's probe.
	release, err := acquireGuard(ctx, newGuardKey(cfg, k), try)
	if err != nil {
		return nil, fmt.Errorf("session lock %q: %w", name, err)
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	var fence int64
	var lockPID int32
	if try {
		var got bool
		var f *int64
		if err := conn.QueryRow(ctx, l.q.trySessionLock, k.Class, k.Object).Scan(&got, &f, &lockPID); err != nil {
			return nil, dbError(fmt.Sprintf("try session lock %q", name), err)
		}
		if !got {
			return nil, fmt.Errorf("session lock %q: %w", name, ErrBusy)
		}
		fence = *f
	} else if err := conn.QueryRow(ctx, l.q.sessionLock, k.Class, k.Object).Scan(&fence, &lockPID); err != nil {
		// A wait cancelled by ctx leaves the connection's state unknown;
		// closing it (deferred) drops anything it might hold.
		return nil, dbError(fmt.Sprintf("session lock %q", name), err)
	}
	if lockPID != pid {
		// Taken by a session this connection does not own; closing the
		// connection (deferred) is all that can end it.
		return nil, fmt.Errorf("session lock %q: %w: taken by backend %d, not %d", name, ErrNoSessionAffinity, lockPID, pid)
	}
	s := &SessionLock{name: name, key: k, fence: fence, q: &l.q, conn: conn, pid: pid, release: release, lost: make(chan struct{}), stop: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	s.wg.Add(1)
	go s.keepalive(interval, timeout)
	return s, nil
}

// probeSessionAffinity fails with ErrNoSessionAffinity unless conn is a
// session of PostgreSQL itself: the backend that answers must be the one
// whose key the session got at start-up (see internal/pgsession; a pooler
// hands out keys of its own, so this does not pass by chance when its pool
// is idle), three times over, against a proxy that would forward its first
// backend's key and move the session later. It returns the backend's pid;
// the lock statement and the keepalive check it again.
func probeSessionAffinity(ctx context.Context, conn *pgx.Conn) (int32, error) {
	for range 3 {
		err := pgsession.Check(ctx, conn)
		if errors.Is(err, pgsession.ErrPooled) {
			return 0, fmt.Errorf("%w: %w", ErrNoSessionAffinity, err)
		}
		if err != nil {
			return 0, dbError("probe session affinity", err)
		}
	}
	return int32(conn.PgConn().PID()), nil
}

// keepalive checks the connection every interval, each check bounded by
// timeout: apart from the interval, since a bound of one interval (100 ms
// in tests) called a lock lost whenever one check was slow.
func (l *SessionLock) keepalive(interval, timeout time.Duration) {
	defer l.wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		l.mu.Lock()
		ctx, cancel := context.WithTimeout(l.ctx, timeout)
		pid, err := pgsession.BackendPID(ctx, l.conn)
		cancel()
		l.mu.Unlock()
		if err != nil {
			l.markLost(fmt.Errorf("session lock %q: connection lost: %w (%w)", l.name, ErrLost, err))
			return
		}
		if pid != l.pid {
			// A pooler moved the session: the lock stays with a backend
			// this connection no longer reaches.
			l.markLost(fmt.Errorf("session lock %q: %w: backend %d now answers, not %d (%w)", l.name, ErrLost, pid, l.pid, ErrNoSessionAffinity))
			return
		}
	}
}

func (l *SessionLock) markLost(cause error) {
	l.once.Do(func() {
		// Context first: whoever sees Lost closed finds it cancelled.
		l.cancel(cause)
		close(l.lost)
	})
}

// Name returns the lock's name.
func (l *SessionLock) Name() string { return l.name }

// Fence returns the token of this acquisition: higher than every earlier
// acquisition's. Pass it to fenced writes made under the lock.
func (l *SessionLock) Fence() int64 { return l.fence }

// Lost is closed when the lock's connection was found dead: the lock is
// gone, and another session may hold it already. Call Unlock still: until
// then, the name stays held within this process.
func (l *SessionLock) Lost() <-chan struct{} { return l.lost }

// Context is cancelled when the lock is lost (cause ErrLost) or
// released (cause ErrReleased). Run the work the lock guards under it.
func (l *SessionLock) Context() context.Context { return l.ctx }

// Unlock releases the lock on the connection that holds it and closes that
// connection. It returns ErrLost when the connection died first, and
// ErrNotLocked when PostgreSQL answered that the session did not hold the
// lock.
func (l *SessionLock) Unlock(ctx context.Context) error {
	first := false
	l.stopOnce.Do(func() {
		close(l.stop)
		first = true
	})
	if !first {
		return fmt.Errorf("session lock %q: %w", l.name, ErrNotLocked)
	}
	l.wg.Wait()
	defer l.markLost(ErrReleased)

	l.mu.Lock()
	defer l.mu.Unlock()
	// Deferred calls run last first: the guard goes once the connection,
	// and any lock it still holds, is gone.
	defer l.release()
	defer l.conn.Close(context.WithoutCancel(ctx))
	select {
	case <-l.lost:
		return fmt.Errorf("session lock %q: %w", l.name, ErrLost)
	default:
	}
	var released bool
	if err := l.conn.QueryRow(ctx, l.q.sessionUnlock, l.key.Class, l.key.Object).Scan(&released); err != nil {
		return fmt.Errorf("session lock %q: unlock: %w", l.name, errors.Join(ErrLost, err))
	}
	if !released {
		return fmt.Errorf("session lock %q: %w", l.name, ErrNotLocked)
	}
	return nil
}
