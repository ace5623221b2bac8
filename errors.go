package pgqueue

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/puddle/v2"
)

// Sentinel errors. Match them with errors.Is; the errors pgqueue returns wrap
// them with the operation and the subject.
var (
	// ErrNilPool is returned by New when the pool is nil.
	ErrNilPool = errors.New("pgqueue: nil pool")

	// ErrClosedPool is returned by any call that needs the database after the
	// pool handed to New was closed.
	ErrClosedPool = errors.New("pgqueue: pool is closed")

	// ErrInvalidSchema is returned by New and Migrate when the schema name does
	// not match SchemaPattern.
	ErrInvalidSchema = errors.New("pgqueue: invalid schema name")

	// ErrInvalidQueue is returned when a queue name does not match
	// QueuePattern, by Enqueue for the job's queue and by New for a
	// configured queue.
	ErrInvalidQueue = errors.New("pgqueue: invalid queue name")

	// ErrInvalidKind is returned by Enqueue and AddWorker when Kind() is
	// empty or longer than 255 bytes.
	ErrInvalidKind = errors.New("pgqueue: invalid job kind")

	// ErrInvalidArgs is returned by Enqueue when the args are nil or cannot
	// be encoded as JSON.
	ErrInvalidArgs = errors.New("pgqueue: invalid job args")

	// ErrArgsTooLarge is returned by Enqueue when the encoded args exceed
	// Config.MaxArgsSize.
	ErrArgsTooLarge = errors.New("pgqueue: job args too large")

	// ErrInvalidOption is returned by Enqueue for an insert option out of
	// range (MaxAttempts below zero, Priority outside int16) and by New for a
	// configuration value out of range.
	ErrInvalidOption = errors.New("pgqueue: invalid option")

	// ErrUnknownKind is recorded in a job's errors when no worker is
	// registered for its kind; the job waits and is tried again later, since
	// a newer deploy may know the kind.
	ErrUnknownKind = errors.New("pgqueue: no worker for job kind")

	// ErrDuplicateWorker is returned by AddWorker when the kind already has a
	// worker.
	ErrDuplicateWorker = errors.New("pgqueue: worker already registered for kind")

	// ErrLeaseLost is returned by CompleteTx, and is the cause of a running
	// job's context cancellation, when the job's claim is gone: the job no
	// longer carries the worker's fence token or is no longer running (it
	// was rescued after its lease expired, or an operator changed it), or
	// the worker could not renew the lease before it ran out. Nothing a
	// stale worker writes about the job reaches the row.
	ErrLeaseLost = errors.New("pgqueue: job lease lost")

	// ErrStaleFence is returned by CheckFenceTx when a higher fence token
	// was already recorded for the resource: the caller's claim was taken
	// over, and its write must not happen. Roll back.
	ErrStaleFence = errors.New("pgqueue: stale fence token")

	// ErrLockBusy is returned by the Try forms of the locks, and by
	// AcquireLease, when another holder has the lock.
	ErrLockBusy = errors.New("pgqueue: lock busy")

	// ErrLockLost is the cause of a SessionLock's context when its
	// connection died, and is returned by Unlock then; Lease.Renew and
	// Lease.Release return it when the lease expired or was taken over.
	ErrLockLost = errors.New("pgqueue: lock lost")

	// ErrLockReleased is the cause of a SessionLock's context after Unlock.
	ErrLockReleased = errors.New("pgqueue: lock released")

	// ErrNotLocked is returned by SessionLock.Unlock when PostgreSQL
	// answered that the session did not hold the lock, or when it was
	// already unlocked.
	ErrNotLocked = errors.New("pgqueue: lock not held")

	// ErrNoSessionAffinity is returned by SessionLock when statements on one
	// connection reach different server sessions, as through PgBouncer in
	// transaction mode: session advisory locks cannot work there. Use
	// lease locks (AcquireLease), which keep no session state.
	ErrNoSessionAffinity = errors.New("pgqueue: connection has no session affinity (pooler in transaction mode?); session locks need one, use lease locks")

	// ErrNoWorkers is returned by Start when the client has queues to work
	// but no Workers in its Config.
	ErrNoWorkers = errors.New("pgqueue: no workers configured")

	// ErrAlreadyStarted is returned by Start on a client that is running.
	ErrAlreadyStarted = errors.New("pgqueue: client already started")

	// ErrNotStarted is returned by Stop on a client that is not running.
	ErrNotStarted = errors.New("pgqueue: client not started")

	// ErrStopping is the cause of the context cancellation a running job
	// sees when Stop's deadline passed before it finished. The job is
	// handed back to the queue without spending an attempt.
	ErrStopping = errors.New("pgqueue: client stopping")
)

// dbError translates errors at the pgx boundary: a closed pool becomes
// ErrClosedPool; anything else is wrapped with the operation.
func dbError(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, puddle.ErrClosedPool) {
		return fmt.Errorf("pgqueue: %s: %w", op, ErrClosedPool)
	}
	return fmt.Errorf("pgqueue: %s: %w", op, err)
}

// ctxError returns ctx's error, wrapped with the operation, when ctx is done.
func ctxError(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgqueue: %s: %w", op, err)
	}
	return nil
}
