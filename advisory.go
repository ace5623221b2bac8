package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// LockKey is the advisory lock a name maps to. pgqueue uses PostgreSQL's
// two-key form, pg_advisory_lock(int4, int4), whose key space is separate
// from the one-bigint form that golang-migrate and most applications use:
// Class is derived from "pgqueue:" and the schema, so two schemas never
// share a lock, and Object from the name. Both are the low 32 bits of FNV-1a
// hashes. Two names of one schema share a key with probability 2^-32; that
// makes them exclude each other, never lets two holders of one name in.
type LockKey struct {
	Class  int32
	Object int32
}

// Int64 returns the key as one 64-bit number, Class in the high half, the
// way pg_locks shows it (classid, objid).
func (k LockKey) Int64() int64 { return int64(k.Class)<<32 | int64(uint32(k.Object)) }

func lockKey(schema, name string) LockKey {
	return LockKey{Class: hash32("pgqueue:" + schema), Object: hash32(name)}
}

func hash32(s string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return int32(h.Sum32())
}

// LockKey returns the advisory key name maps to in this client's schema.
func (c *Client) LockKey(name string) LockKey { return lockKey(c.config.Schema, name) }

// XactLock waits, as long as ctx allows, for the advisory lock of name on
// tx's transaction, and returns a fence token for this acquisition that is
// higher than every earlier one. The lock is released when tx commits or
// rolls back, or when its connection dies.
func (c *Client) XactLock(ctx context.Context, tx pgx.Tx, name string) (fence int64, err error) {
	k := c.LockKey(name)
	if err := tx.QueryRow(ctx, c.q.xactLock, k.Class, k.Object).Scan(&fence); err != nil {
		awaitServerSide(tx.Conn().PgConn())
		return 0, dbError(fmt.Sprintf("xact lock %q", name), err)
	}
	return fence, nil
}

// abandonedWaitGrace bounds how long a lock call whose wait ctx ended waits
// more for the server to end that wait.
const abandonedWaitGrace = time.Second

// awaitServerSide waits, at most abandonedWaitGrace, until the session of a
// connection pgx closed is gone from the server. When ctx ends a lock wait,
// pgx closes the connection in the background, sending a cancel request;
// until the server acts on it the session still waits, and may be granted
// the lock after the caller was told it did not get it.
func awaitServerSide(pc *pgconn.PgConn) {
	if !pc.IsClosed() {
		return
	}
	t := time.NewTimer(abandonedWaitGrace)
	defer t.Stop()
	select {
	case <-pc.CleanupDone():
	case <-t.C:
	}
}

// TryXactLock takes the advisory lock of name on tx's transaction if it is
// free, with a fence token, or returns ErrLockBusy at once.
func (c *Client) TryXactLock(ctx context.Context, tx pgx.Tx, name string) (fence int64, err error) {
	k := c.LockKey(name)
	var got bool
	var f *int64
	if err := tx.QueryRow(ctx, c.q.tryXactLock, k.Class, k.Object).Scan(&got, &f); err != nil {
		return 0, dbError(fmt.Sprintf("try xact lock %q", name), err)
	}
	if !got {
		return 0, fmt.Errorf("xact lock %q: %w", name, ErrLockBusy)
	}
	return *f, nil
}

// SessionLock is an advisory lock held by the session of a connection of
// its own. The connection is dialled for the lock and never shared, so the
// unlock always reaches the session that holds the lock: a pool could hand
// it to another. A keepalive notices the connection's death; then Lost is
// closed and Context is cancelled with ErrLockLost.
type SessionLock struct {
	name  string
	key   LockKey
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

// SessionLockOpts are options of SessionLock and TrySessionLock.
type SessionLockOpts struct {
	// KeepaliveInterval is how often the connection is checked. Default 1s.
	KeepaliveInterval time.Duration
}

// SessionLock waits, as long as ctx allows, for the advisory lock of name
// on a connection dialled for it with the pool's configuration, and returns
// it held. Release it with Unlock. opts may be nil.
//
// It returns ErrNoSessionAffinity when the connection goes through a
// pooler that moves sessions between statements (PgBouncer in transaction
// mode): session locks cannot work there; use lease locks.
func (c *Client) SessionLock(ctx context.Context, name string, opts *SessionLockOpts) (*SessionLock, error) {
	return c.sessionLock(ctx, name, opts, false)
}

// TrySessionLock is SessionLock without waiting: ErrLockBusy when another
// session holds the lock.
func (c *Client) TrySessionLock(ctx context.Context, name string, opts *SessionLockOpts) (*SessionLock, error) {
	return c.sessionLock(ctx, name, opts, true)
}

func (c *Client) sessionLock(ctx context.Context, name string, opts *SessionLockOpts, try bool) (_ *SessionLock, err error) {
	if err := ctxError(ctx, "session lock"); err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &SessionLockOpts{}
	}
	interval := opts.KeepaliveInterval
	if interval <= 0 {
		interval = time.Second
	}
	conn, err := pgx.ConnectConfig(ctx, c.pool.Config().ConnConfig.Copy())
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
	k := c.LockKey(name)
	var fence int64
	if try {
		var got bool
		var f *int64
		if err := conn.QueryRow(ctx, c.q.trySessionLock, k.Class, k.Object).Scan(&got, &f); err != nil {
			return nil, dbError(fmt.Sprintf("try session lock %q", name), err)
		}
		if !got {
			return nil, fmt.Errorf("session lock %q: %w", name, ErrLockBusy)
		}
		fence = *f
	} else if err := conn.QueryRow(ctx, c.q.sessionLock, k.Class, k.Object).Scan(&fence); err != nil {
		// A wait cancelled by ctx leaves the connection's state unknown;
		// closing it (deferred) drops anything it might hold.
		return nil, dbError(fmt.Sprintf("session lock %q", name), err)
	}
	l := &SessionLock{name: name, key: k, fence: fence, q: c.q, conn: conn, pid: pid, lost: make(chan struct{}), stop: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	l.wg.Add(1)
	go l.keepalive(interval)
	return l, nil
}

// probeSessionAffinity fails when two statements on one connection run in
// different backends: a pooler in transaction or statement mode. It
// returns the backend's pid. A pooler that happens to keep one backend for
// these statements passes; the keepalive checks the pid again.
func probeSessionAffinity(ctx context.Context, conn *pgx.Conn) (int32, error) {
	var first int32
	for i := range 3 {
		pid, err := backendPID(ctx, conn)
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

func backendPID(ctx context.Context, conn *pgx.Conn) (int32, error) {
	var pid int32
	err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid)
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
		pid, err := backendPID(ctx, l.conn)
		cancel()
		l.mu.Unlock()
		if err != nil {
			l.markLost(fmt.Errorf("session lock %q: connection lost: %w (%w)", l.name, ErrLockLost, err))
			return
		}
		if pid != l.pid {
			// A pooler moved the session: the lock stays with a backend
			// this connection no longer reaches.
			l.markLost(fmt.Errorf("session lock %q: %w: backend %d now answers, not %d (%w)", l.name, ErrLockLost, pid, l.pid, ErrNoSessionAffinity))
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

// Context is cancelled when the lock is lost (cause ErrLockLost) or
// released (cause ErrLockReleased). Run the work the lock guards under it.
func (l *SessionLock) Context() context.Context { return l.ctx }

// Unlock releases the lock on the connection that holds it and closes that
// connection. It returns ErrLockLost when the connection died first, and
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
	defer l.markLost(ErrLockReleased)

	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.conn.Close(context.WithoutCancel(ctx))
	select {
	case <-l.lost:
		return fmt.Errorf("session lock %q: %w", l.name, ErrLockLost)
	default:
	}
	var released bool
	if err := l.conn.QueryRow(ctx, l.q.sessionUnlock, l.key.Class, l.key.Object).Scan(&released); err != nil {
		return fmt.Errorf("session lock %q: unlock: %w", l.name, errors.Join(ErrLockLost, err))
	}
	if !released {
		return fmt.Errorf("session lock %q: %w", l.name, ErrNotLocked)
	}
	return nil
}
