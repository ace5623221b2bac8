package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/pgsession"
	"github.com/pgqueue/pgqueue/internal/sqlschema"
)

// electorLockPrefix names an election's session lock, and the fence
// resource that records the last term held by a session too: names of
// their own, so that a user's session lock or fence on the lease's name
// never collides with them.
const electorLockPrefix = "pglock:elector:"

// electorQueries are the elector's own statements.
type electorQueries struct {
	tryLock, unlock, takeover, mark string
}

func loadElectorQueries(schema string) (electorQueries, error) {
	var q electorQueries
	err := sqlschema.Load(sqlFiles, "sql", schema, map[string]*string{
		"elector_try_lock": &q.tryLock, "session_unlock": &q.unlock, "lease_takeover": &q.takeover, "elector_mark": &q.mark,
	})
	return q, err
}

// electorSession is an elector's pinned connection to a session of its
// own, on which the leader holds the election's session advisory lock as
// well as the lease. The lock is proof of life: PostgreSQL drops it when
// the session ends (a killed process's socket is closed by its kernel).
// A leader that holds it records its term under the fence resource of the
// lock's name (lease_takeover.sql, elector_mark.sql), so a candidate that
// gets the lock while the lease's term is the recorded one knows that
// term's session ended, and takes the lease over at once. A term taken on
// the lease alone (the lock was busy: a stuck leader's session held it)
// is not recorded, and is taken over only once expired, until its leader
// gets the lock and records it.
//
// Every statement on it is one quick statement: pg_try_advisory_lock,
// pg_advisory_unlock, pg_backend_pid. It is used by one goroutine at a
// time: the elector's own, or the leader's session check, which serve
// starts and waits for.
type electorSession struct {
	l     *Locker
	lock  string // the lock's name, for logs and errors
	key   Key
	q     *electorQueries
	guard guardKey

	conn *pgx.Conn // nil until dialled and after a failure
	pid  int32     // the backend of conn
	// release is the process-local guard (session_guard.go), non-nil
	// while this session holds the lock.
	release func()
	// refused: the connection goes through a pooler; the elector keeps
	// to the lease alone from then on.
	refused bool
	// After a failed dial, the next waits until nextDial, redial later.
	redial   time.Duration
	nextDial time.Time
	// quietUntil: a follower found a live leader that leads on the lease
	// alone; it leaves the lock to that leader until then.
	quietUntil time.Time
}

func newElectorSession(l *Locker, name string, q *electorQueries, redial time.Duration) *electorSession {
	lock := electorLockPrefix + name
	k := l.Key(lock)
	return &electorSession{l: l, lock: lock, key: k, q: q, guard: newGuardKey(l.sessionConnConfig(), k), redial: redial}
}

// held reports whether this session holds the lock.
func (s *electorSession) held() bool { return s.release != nil }

// dial opens the connection if there is none. It reports whether there is
// one: not behind a pooler (said once, at Warn; the lease alone serves from
// then on), nor when the dial failed or failed less than redial ago.
func (s *electorSession) dial(ctx context.Context, timeout time.Duration) bool {
	if s.conn != nil || s.refused || time.Now().Before(s.nextDial) {
		return s.conn != nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, s.l.sessionConnConfig())
	if err != nil {
		s.nextDial = time.Now().Add(s.redial)
		if ctx.Err() == nil {
			s.l.log.Warn("pglock: elector session: connect failed; the lease alone serves meanwhile", "lock", s.lock, "err", err)
		}
		return false
	}
	pid, err := probeSessionAffinity(ctx, conn)
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		s.nextDial = time.Now().Add(s.redial)
		if errors.Is(err, ErrNoSessionAffinity) {
			s.refused = true
			s.l.log.Warn("pglock: elector session goes through a pooler: leadership rests on the lease alone, and a dead leader is replaced only once its lease expires; set Config.DirectConnConfig for a takeover as soon as its session ends",
				"lock", s.lock, "err", err)
		} else if ctx.Err() == nil {
			s.l.log.Warn("pglock: elector session: probe failed; the lease alone serves meanwhile", "lock", s.lock, "err", err)
		}
		return false
	}
	s.conn, s.pid = conn, pid
	return true
}

// tryLock takes the lock if no session holds it, without waiting. It
// reports whether this session holds it now.
func (s *electorSession) tryLock(ctx context.Context, timeout time.Duration) (bool, error) {
	if s.held() {
		return true, nil
	}
	if s.conn == nil {
		return false, nil
	}
	release, err := acquireGuard(ctx, s.guard, true)
	if errors.Is(err, ErrBusy) {
		return false, nil // another elector of this process holds it
	}
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var got bool
	var pid int32
	err = s.conn.QueryRow(ctx, s.q.tryLock, s.key.Class, s.key.Object).Scan(&got, &pid)
	switch {
	case err != nil:
		// The lock's state is unknown: closing the connection ends it.
		s.drop(ctx)
		release()
		return false, dbError(fmt.Sprintf("elector session lock %q", s.lock), err)
	case pid != s.pid:
		s.drop(ctx)
		release()
		return false, fmt.Errorf("elector session lock %q: %w: taken by backend %d, not %d", s.lock, ErrNoSessionAffinity, pid, s.pid)
	case !got:
		release()
		return false, nil
	}
	s.release = release
	return true, nil
}

// check makes sure the session that holds the lock is still there: the
// same backend answers on the connection. An error means the lock is gone
// (or its state unknown, and the connection is closed to end it).
func (s *electorSession) check(ctx context.Context, timeout time.Duration) error {
	if s.conn == nil {
		return fmt.Errorf("elector session lock %q: no connection", s.lock)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pid, err := pgsession.BackendPID(ctx, s.conn)
	if err != nil {
		s.drop(ctx)
		return dbError(fmt.Sprintf("elector session lock %q: connection lost", s.lock), err)
	}
	if pid != s.pid {
		s.drop(ctx)
		return fmt.Errorf("elector session lock %q: %w: backend %d now answers, not %d", s.lock, ErrNoSessionAffinity, pid, s.pid)
	}
	return nil
}

// mark records term as held by this session too, while it is the lease's
// live term; it reports whether it did.
func (s *electorSession) mark(ctx context.Context, lease string, term int64) (bool, error) {
	tag, err := s.l.pool.Exec(ctx, s.q.mark, lease, term, s.lock)
	if err != nil {
		return false, dbError(fmt.Sprintf("elector session lock %q: record term %d", s.lock, term), err)
	}
	return tag.RowsAffected() == 1, nil
}

// unlock releases the lock, keeping the connection for the next campaign;
// when the unlock cannot be confirmed, it closes the connection, which
// ends the lock with the session.
func (s *electorSession) unlock(ctx context.Context, timeout time.Duration) {
	if !s.held() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	var released bool
	if err := s.conn.QueryRow(ctx, s.q.unlock, s.key.Class, s.key.Object).Scan(&released); err != nil || !released {
		s.drop(ctx)
		return
	}
	s.release()
	s.release = nil
}

// drop closes the connection, which ends the session and any lock it
// holds, and then releases the process-local guard.
func (s *electorSession) drop(ctx context.Context) {
	if s.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	_ = s.conn.Close(ctx)
	cancel()
	awaitServerSide(s.conn.PgConn())
	s.conn = nil
	if s.release != nil {
		s.release()
		s.release = nil
	}
}

// takenFrom is the lease as a session takeover found it.
type takenFrom struct {
	holder *string
	fence  *int64
	valid  *bool // its holder's lease had not expired yet
}

// takeover takes the lease with a new term when it is free or expired,
// or when its term was held by a session too: only for a candidate whose
// session holds the election's lock, which proves that session ended (its
// leader is dead, or has lost its session and learns it at its next check
// or renewal; the new term's fence refuses its writes meanwhile). ErrBusy
// when a live term taken on the lease alone holds it.
func (e *Elector) takeover(ctx context.Context, s *electorSession) (*LeaseLock, takenFrom, error) {
	sent := time.Now()
	var fence int64
	var from takenFrom
	err := e.l.pool.QueryRow(ctx, e.q.takeover, e.name, e.cfg.Holder, e.cfg.TTL.Microseconds(), s.lock).Scan(&fence, &from.holder, &from.fence, &from.valid)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, from, fmt.Errorf("lease lock %q: %w", e.name, ErrBusy)
	}
	if err != nil {
		return nil, from, dbError(fmt.Sprintf("take lease %q over", e.name), err)
	}
	return &LeaseLock{l: e.l, name: e.name, holder: e.cfg.Holder, ttl: e.cfg.TTL, fence: fence, validUntil: sent.Add(e.cfg.TTL)}, from, nil
}
