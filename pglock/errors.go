package pglock

import (
	"errors"

	"github.com/pgqueue/pgqueue/internal/dberr"
	"github.com/pgqueue/pgqueue/internal/sqlschema"
	"github.com/pgqueue/pgqueue/locks"
)

// Sentinel errors. Match them with errors.Is; the errors pglock returns
// wrap them with the operation and the lock's name.
var (
	// ErrBusy is returned by the Try forms (TryLockXact, TryLockSession,
	// TryLockLease, and TryLock of the locks.Locker adapters) when another
	// holder has the lock. It never stands for a failure to reach the
	// database. It is the same value as locks.ErrBusy.
	ErrBusy = locks.ErrBusy

	// ErrLost is how every lock kind says it ended without its holder
	// releasing it: the cause of a SessionLock's context when its
	// connection died or a pooler moved its session (and Unlock's error
	// then); the error of LeaseLock.Renew and LeaseLock.Release when the
	// lease expired or was taken over; the cause of an Elector term's
	// context when leadership ended. Another holder may have the lock
	// already: stop acting under it at once. It is the same value as
	// locks.ErrLost.
	ErrLost = locks.ErrLost

	// ErrReleased is the cause of a SessionLock's context after Unlock,
	// and of the adapters' Lock contexts after Release. It is the same
	// value as locks.ErrReleased.
	ErrReleased = locks.ErrReleased

	// ErrStaleFence is returned by CheckFenceTx when a higher token was
	// already recorded for the resource. pgqueue.IsStaleFence reports true
	// for it too, as the error also wraps check_fence's PQF01 error.
	ErrStaleFence = errors.New("pglock: stale fence token")

	// ErrFenceBusy is returned by CheckFenceTx when another transaction
	// held the resource's fence row for the whole bound
	// (Config.FenceLockTimeout, DefaultFenceLockTimeout for the free
	// function): a holder stalled between its check and its commit. The
	// caller's transaction is aborted: roll back. It also wraps the
	// server's lock_timeout error (SQLSTATE 55P03).
	ErrFenceBusy = errors.New("pglock: fence row busy: another transaction holds it")

	// ErrNotLocked is returned by SessionLock.Unlock when PostgreSQL
	// answered that the session did not hold the lock, or when it was
	// unlocked already.
	ErrNotLocked = errors.New("pglock: lock not held")

	// ErrNoSessionAffinity is returned by LockSession and TryLockSession
	// when statements on one connection reach different server sessions,
	// as through PgBouncer in transaction mode: session advisory locks
	// cannot work there; use lease locks, which keep no session state.
	ErrNoSessionAffinity = errors.New("pglock: connection has no session affinity (pooler in transaction mode?); session locks need one, use lease locks")

	// ErrInvalidOption is returned for an option out of range: a lease ttl
	// that is not positive, elector intervals that do not fit in its TTL.
	ErrInvalidOption = errors.New("pglock: invalid option")

	// ErrNilPool is returned by New when the pool is nil.
	ErrNilPool = errors.New("pglock: nil pool")

	// ErrInvalidSchema is returned by New when Config.Schema is not a
	// valid schema name. It is the same value as pgqueue.ErrInvalidSchema.
	ErrInvalidSchema = sqlschema.ErrInvalid

	// ErrClosedPool is returned by the calls that run statements through
	// the pool (lease locks, the elector's campaigns) after the pool handed
	// to New was closed. Session locks dial a connection of their own from
	// the pool's configuration, so they work after the pool closed. It is
	// the same value as pgqueue.ErrClosedPool.
	ErrClosedPool = dberr.ErrClosedPool
)

func dbError(op string, err error) error { return dberr.Wrap("pglock", op, err) }
