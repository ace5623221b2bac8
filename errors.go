package pgqueue

import (
	"context"
	"errors"

	"github.com/pgqueue/pgqueue/internal/dberr"
	"github.com/pgqueue/pgqueue/internal/sqlschema"
)

// Sentinel errors. Match them with errors.Is; the errors pgqueue returns wrap
// them with the operation and the subject.
var (
	// ErrNilPool is returned by New when the pool is nil.
	ErrNilPool = errors.New("pgqueue: nil pool")

	// ErrInvalidRole is returned by Grants when the role name is not a
	// lower-case SQL identifier of at most 63 bytes.
	ErrInvalidRole = errors.New("pgqueue: invalid role name")

	// ErrSchemaOutdated is returned by Start when the schema's migrations
	// are older than this version of pgqueue needs (or none, or a failed
	// one): run Migrate first.
	ErrSchemaOutdated = errors.New("pgqueue: schema outdated")

	// ErrNilTx is returned by the calls that take a caller's transaction
	// (CompleteTx, CheckFenceTx) when it is nil.
	ErrNilTx = errors.New("pgqueue: nil transaction")

	// ErrClosedPool is returned by any call that needs the database after the
	// pool handed to New was closed. It is the same value as
	// pglock.ErrClosedPool.
	ErrClosedPool = dberr.ErrClosedPool

	// ErrInvalidSchema is returned by New and Migrate when the schema name is
	// not a lower-case SQL identifier of at most 63 bytes
	// (^[a-z_][a-z0-9_]{0,62}$). It is the same value as
	// pglock.ErrInvalidSchema.
	ErrInvalidSchema = sqlschema.ErrInvalid

	// ErrInvalidQueue is returned when a queue name is not 1 to 63 bytes of
	// lower-case letters, digits, '_', '-' and '.' starting with a letter or
	// digit: by Enqueue for the job's queue, by New for a configured
	// queue, and by QueuePause and QueueResume.
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
	// range (MaxAttempts below zero or above 2^31-1) and by New for a
	// configuration value out of range.
	ErrInvalidOption = errors.New("pgqueue: invalid option")

	// ErrUnknownKind is the error of a claimed job whose kind has no worker
	// in the client's Workers: it is logged with the job, and its text is
	// recorded in the job's errors. The job is not failed: it waits
	// Config.UnknownKindDelay, attempt unspent, and is offered again, since
	// a newer deploy may know the kind; after Config.UnknownKindMaxTries
	// such tries it is discarded.
	ErrUnknownKind = errors.New("pgqueue: no worker for job kind")

	// ErrNotInserted is returned by the Enqueue calls when an insert
	// middleware returned nil without calling next: nothing was inserted.
	ErrNotInserted = errors.New("pgqueue: insert middleware skipped the insert")

	// ErrDuplicatePeriodicJob is returned by New and PeriodicJobs.Add when
	// a periodic job's name is taken already: names identify periodic jobs
	// in the database.
	ErrDuplicatePeriodicJob = errors.New("pgqueue: periodic job name already taken")

	// ErrDuplicateWorker is returned by AddWorker when the kind already has a
	// worker.
	ErrDuplicateWorker = errors.New("pgqueue: worker already registered for kind")

	// ErrJobLeaseLost is returned by CompleteTx, and is the cause of a
	// running job's context cancellation, when the worker's claim on the
	// job is lost: the job no longer carries the worker's fence token or is
	// no longer running (it was rescued after its job lease expired, or an
	// operator changed it), or the worker could not renew the job lease
	// before it ran out. Nothing a stale worker writes about the job
	// reaches the row. (Locks say the same with pglock.ErrLost.)
	ErrJobLeaseLost = errors.New("pgqueue: job lease lost")

	// ErrStaleFence is returned by CheckFenceTx when a higher fence token
	// was already recorded for the resource: the caller's claim was taken
	// over, and its write must not happen. Roll back.
	ErrStaleFence = errors.New("pgqueue: stale fence token")

	// ErrNoWorkers is returned by New when Config.Queues names queues to
	// work but Config.Workers is nil.
	ErrNoWorkers = errors.New("pgqueue: no workers configured")

	// ErrAlreadyStarted is returned by Start on a client that is running.
	ErrAlreadyStarted = errors.New("pgqueue: client already started")

	// ErrNotStarted is returned by Stop on a client that is not running.
	ErrNotStarted = errors.New("pgqueue: client not started")

	// ErrJobNotFound is returned by JobGet, JobCancel, JobRetry and
	// JobDelete when no job has the id (it never existed or was deleted,
	// by JobDelete or by retention).
	ErrJobNotFound = errors.New("pgqueue: job not found")

	// ErrInvalidCursor is returned by JobList when JobListParams.Cursor is
	// not a cursor JobList returned, or was returned for another ordering
	// or direction.
	ErrInvalidCursor = errors.New("pgqueue: invalid job list cursor")

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

	// ErrJobCancelled is the cause of a running job's context cancellation
	// after JobCancel asked for it: the job ends cancelled, not retried.
	ErrJobCancelled = errors.New("pgqueue: job cancelled")

	// ErrNoJobContext is returned by RecordOutput and RecordProgress when
	// the context is not a running job's (or derived from one).
	ErrNoJobContext = errors.New("pgqueue: not a job's context")

	// ErrOutputTooLarge is returned by RecordOutput and RecordProgress when
	// the encoded value exceeds Config.MaxOutputSize.
	ErrOutputTooLarge = errors.New("pgqueue: job output too large")

	// ErrPoolerExecMode is returned by Start when the pool goes through a
	// connection pooler (PgBouncer in transaction mode) and its pgx
	// default_query_exec_mode is cache_statement (pgx's default) or
	// describe_exec: both keep a prepared statement from one round trip
	// to the next, which the pooler may run in another backend. Use
	// cache_describe, exec or simple_protocol; see docs/operations.md.
	ErrPoolerExecMode = errors.New("pgqueue: query exec mode does not work through a connection pooler")

	// ErrNotDirect is returned by Start when Config.DirectConnConfig goes
	// through a connection pooler: it must reach PostgreSQL itself.
	ErrNotDirect = errors.New("pgqueue: direct connection goes through a pooler")

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

	// ErrStopping is the cause of the context cancellation a running job
	// sees when Stop's deadline passed before it finished. The job is
	// handed back to the queue without spending an attempt.
	ErrStopping = errors.New("pgqueue: client stopping")
)

// dbError translates errors at the pgx boundary: a closed pool becomes
// ErrClosedPool; anything else is wrapped with the operation.
func dbError(op string, err error) error { return dberr.Wrap("pgqueue", op, err) }

// ctxError returns ctx's error, wrapped with the operation, when ctx is done.
func ctxError(ctx context.Context, op string) error { return dberr.Ctx(ctx, "pgqueue", op) }
