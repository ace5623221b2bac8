package pglock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
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

	mu   sync.Mutex // serialises use of conn
	conn *pgx.Conn
	pid  int32 // the backend that holds the lock

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
}

// LockSession waits, as long as ctx allows, for the advisory lock of name
// on a connection dialled for it with the pool's configuration, and returns
// it held. Release it with Unlock. opts may be nil.
//
// It returns ErrNoSessionAffinity when the connection goes through a
// pooler that moves sessions between statements (PgBouncer in transaction
// mode): session locks cannot work there; use lease locks.
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
	conn, err := pgx.ConnectConfig(ctx, l.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, dbError(fmt.Sprintf("session lock %q: connect", name), err)
	}
	defer func() {
		if err != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
			awaitServerSide(conn.PgConn())
		}
	}()
	pid, err := probeSessionAffinity(ctx, conn, l.q.backendPID)
	if err != nil {
		return nil, fmt.Errorf("session lock %q: %w", name, err)
	}
	k := l.Key(name)
	var fence int64
	if try {
		var got bool
		var f *int64
		if err := conn.QueryRow(ctx, l.q.trySessionLock, k.Class, k.Object).Scan(&got, &f); err != nil {
			return nil, dbError(fmt.Sprintf("try session lock %q", name), err)
		}
		if !got {
			return nil, fmt.Errorf("session lock %q: %w", name, ErrBusy)
		}
		fence = *f
	} else if err := conn.QueryRow(ctx, l.q.sessionLock, k.Class, k.Object).Scan(&fence); err != nil {
		// A wait cancelled by ctx leaves the connection's state unknown;
		// closing it (deferred) drops anything it might hold.
		return nil, dbError(fmt.Sprintf("session lock %q", name), err)
	}
	s := &SessionLock{name: name, key: k, fence: fence, q: &l.q, conn: conn, pid: pid, lost: make(chan struct{}), stop: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	s.wg.Add(1)
	go s.keepalive(interval)
	return s, nil
}

// probeSessionAffinity fails when two statements on one connection run in
// different backends: a pooler in transaction or statement mode. It
// returns the backend's pid. A pooler that happens to keep one backend for
// these statements passes; the keepalive checks the pid again.
func probeSessionAffinity(ctx context.Context, conn *pgx.Conn, query string) (int32, error) {
	var first int32
	for i := range 3 {
		pid, err := backendPID(ctx, conn, query)
		if err != nil {
			return 0, dbError("probe session affinity", err)
		}
		if i == 0 {
			first = pid
		} else if pid != first {
			return 0, ErrNoSessionAffinity
		}
	}
	return first, nil
}

func backendPID(ctx context.Context, conn *pgx.Conn, query string) (int32, error) {
	var pid int32
	err := conn.QueryRow(ctx, query).Scan(&pid)
	return pid, err
}

func (l *SessionLock) keepalive(interval time.Duration) {
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
		ctx, cancel := context.WithTimeout(l.ctx, interval)
		pid, err := backendPID(ctx, l.conn, l.q.backendPID)
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
// gone, and another session may hold it already.
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
