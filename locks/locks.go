// Package locks is the lock API that every pgqueue lock backend implements:
// PostgreSQL session, transaction and lease locks (package pglock), file
// locks on one host (package filelock), Redis (module
// github.com/pgqueue/pgqueue/redislock) and etcd (module
// github.com/pgqueue/pgqueue/etcdlock). Code written against [Locker] and
// [Lock] switches backends by changing the one constructor that makes its
// Locker.
//
// Every acquisition yields a fence token: a number higher than that of
// every earlier acquisition of the same lock, whoever made it. No lock
// keeps a holder that paused past its expiry from writing, so write under
// a lock only where the write checks the token, as PostgreSQL's
// <schema>.check_fence(resource, token) does (pglock.CheckFenceTx in Go):
// it refuses a token lower than the highest it has seen for resource.
// Tokens are comparable only within one lock of one backend, so fence
// each resource with tokens from one lock.
//
// The package has no dependencies beyond the standard library, so that
// the file, Redis and etcd backends do not pull in PostgreSQL's client.
package locks

import (
	"context"
	"errors"
)

// Sentinel errors, shared by every backend (pglock.ErrBusy, filelock.ErrBusy
// and the others are these same values). Backends wrap them with the
// operation and the lock's name; match them with errors.Is.
var (
	// ErrBusy is returned by Locker.TryLock when another holder has the
	// lock, and only then: a failure to reach the backend (network, I/O,
	// permissions) is returned as that failure and never wraps ErrBusy.
	ErrBusy = errors.New("lock busy")

	// ErrLost is the cause of a Lock's context when the hold ended without
	// its holder releasing it (lease or TTL expired, session or connection
	// gone, taken over), and the error of Release then. Another holder may
	// have the lock already: stop acting under it at once.
	ErrLost = errors.New("lock lost")

	// ErrReleased is the cause of a Lock's context after Release.
	ErrReleased = errors.New("lock released")

	// ErrExpiredOnArrival is returned by Locker.TryLock of the backends
	// that lock by time (Redis, etcd) when the backend granted the lock
	// but its answer came after the acquisition's validity had ended,
	// counted from the request's sending: the server or the link stalled.
	// The lock is not held, and the backend gives the grant back, best
	// effort. It never wraps ErrBusy, as the lock may well be free:
	// Locker.Lock tries again.
	ErrExpiredOnArrival = errors.New("lock grant arrived after its validity")
)

// Locker acquires one named lock on one backend. Implementations are safe
// for concurrent use; each acquisition returns a Lock of its own.
type Locker interface {
	// Lock waits until the lock is acquired, or until ctx is done, when
	// it returns an error wrapping ctx's error.
	Lock(ctx context.Context) (Lock, error)

	// TryLock acquires the lock if it is free, and otherwise returns an
	// error wrapping ErrBusy at once. ctx bounds the round trip to the
	// backend. Backends that lock by time return an error wrapping
	// ErrExpiredOnArrival, and no Lock, when the grant came too late to
	// be held.
	TryLock(ctx context.Context) (Lock, error)
}

// Lock is one acquisition of a lock, held until Release or until it is
// lost.
type Lock interface {
	// Name returns the lock's name (a path, for a file lock).
	Name() string

	// Fence returns this acquisition's fence token: higher than the token
	// of every earlier acquisition of the same lock. Pass it to the
	// fenced writes made under the lock.
	Fence() int64

	// Context is cancelled when the lock is lost, with a cause wrapping
	// ErrLost (read it with context.Cause), or released, with cause
	// ErrReleased. It carries no deadline: the backend decides when the
	// lock is lost. Run the work the lock guards under it.
	Context() context.Context

	// Release gives the lock up. It returns an error wrapping ErrLost when
	// the lock was lost first. The Lock's context is cancelled whatever
	// Release returns.
	Release(ctx context.Context) error
}
