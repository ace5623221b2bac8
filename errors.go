package pgqueue

import (
	"context"
	"errors"
	"fmt"

	"github.com/pgqueue/pgqueue/internal/dberr"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// The errors the machinery returns, shared with the internal packages
// through package pgqueuetype (see there for when each is returned).
var (
	ErrInvalid        = pgqueuetype.ErrInvalid
	ErrTooLarge       = pgqueuetype.ErrTooLarge
	ErrSchemaOutdated = pgqueuetype.ErrSchemaOutdated
	ErrUnknownKind    = pgqueuetype.ErrUnknownKind
	ErrJobLeaseLost   = pgqueuetype.ErrJobLeaseLost
	ErrJobCancelled   = pgqueuetype.ErrJobCancelled
	ErrStopping       = pgqueuetype.ErrStopping

	ErrDependencyCycle    = pgqueuetype.ErrDependencyCycle
	ErrDependencyNotFound = pgqueuetype.ErrDependencyNotFound
	ErrWorkflowLimit      = pgqueuetype.ErrWorkflowLimit
	ErrWorkflowNotFound   = pgqueuetype.ErrWorkflowNotFound
)

// The errors of the public API itself. Match them with errors.Is; the
// errors pgqueue returns wrap them with the operation and the subject.
var (

	// ErrClosedPool is returned by any call that needs the database after the
	// pool handed to New was closed. It is the same value as
	// pglock.ErrClosedPool.
	ErrClosedPool = dberr.ErrClosedPool

	// ErrNotEnqueued is returned by the Enqueue calls when an insert
	// middleware returned nil without calling next: nothing was inserted.
	ErrNotEnqueued = errors.New("pgqueue: enqueue middleware skipped the enqueue")

	// ErrStaleFence is returned by CheckFenceTx when a higher fence token
	// was already recorded for the resource: the caller's claim was taken
	// over, and its write must not happen. Roll back.
	ErrStaleFence = errors.New("pgqueue: stale fence token")

	// ErrFenceBusy is returned by CheckFenceTx when another transaction
	// held the resource's fence row for all of Config.FenceLockTimeout:
	// a holder stalled between its own check and its commit. The caller's
	// transaction is aborted: roll back, and try again later or give up.
	// It also wraps the server's lock_timeout error (SQLSTATE 55P03).
	ErrFenceBusy = errors.New("pgqueue: fence row busy: another transaction holds it")

	// ErrAlreadyStarted is returned by Start on a client that is running.
	ErrAlreadyStarted = errors.New("pgqueue: client already started")

	// ErrNotStarted is returned by Stop on a client that is not running.
	ErrNotStarted = errors.New("pgqueue: client not started")

	// ErrJobNotFound is returned by JobGet, JobCancel, JobRetry and
	// JobDelete when no job has the id (it never existed or was deleted,
	// by JobDelete or by retention).
	ErrJobNotFound = errors.New("pgqueue: job not found")

	// ErrJobRunning is returned by JobRetry and JobDelete for a job that is
	// running: its holder's fence and lease are left alone. Cancel it with
	// JobCancel first.
	ErrJobRunning = errors.New("pgqueue: job is running")

	// ErrUniqueConflict is returned by JobRetry and JobRetryMany when
	// running a unique job again would make two jobs with its unique key in
	// their blocking states: another job holds the key (inserted after this
	// one finished in a state outside its UniqueOpts.ByState). Nothing was
	// changed; the other job is the one that runs.
	ErrUniqueConflict = errors.New("pgqueue: unique key held by another job")

	// ErrNoJobContext is returned by RecordOutput, RecordProgress and
	// ParentOutputs when the context is not a running job's (or derived
	// from one).
	ErrNoJobContext = errors.New("pgqueue: not a job's context")

	// ErrPoolerExecMode is returned by Start when the pool goes through a
	// connection pooler (PgBouncer in transaction mode) and its pgx
	// default_query_exec_mode is cache_statement (pgx's default) or
	// describe_exec: both keep a prepared statement from one round trip
	// to the next, which the pooler may run in another backend. Use
	// cache_describe, exec or simple_protocol; see docs/guides/poolers.md.
	ErrPoolerExecMode = errors.New("pgqueue: query exec mode does not work through a connection pooler")

	// ErrMigrateThroughPooler is returned by Migrate, when there is
	// something to migrate, and by NewMigrator when the pool goes through
	// a connection pooler: a migration holds session advisory
	// locks, which a pooler in transaction mode would leave held on a
	// backend it shares, blocking the next migration until the pooler
	// closes that backend. Migrate through a direct connection (a pool of
	// Config.DirectConnConfig's database, or "pgqueue migrate" with a
	// direct URL). Migrate on a current schema only reads its version and
	// works through a pooler.
	ErrMigrateThroughPooler = errors.New("pgqueue: migrations need a direct connection, not a pooler")
)

// dbError translates errors at the pgx boundary: a closed pool becomes
// ErrClosedPool; anything else is wrapped with the operation.
func dbError(op string, err error) error { return dberr.Wrap("pgqueue", op, err) }

// ctxError returns ctx's error, wrapped with the operation, when ctx is done.
func ctxError(ctx context.Context, op string) error { return dberr.Ctx(ctx, "pgqueue", op) }

// Narrow forms of ErrInvalid with a fixed text.
var (
	errNilPool   = fmt.Errorf("%w: nil pool", ErrInvalid)
	errNilTx     = fmt.Errorf("%w: nil transaction", ErrInvalid)
	errNoWorkers = fmt.Errorf("%w config: Queues set without Workers", ErrInvalid)
)
