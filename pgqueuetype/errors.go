package pgqueuetype

import "errors"

// The errors the machinery returns. Package pgqueue re-exports each under
// the same name; match them with errors.Is. The errors pgqueue returns wrap
// them with the operation and what was wrong.
var (
	// ErrInvalid matches every input pgqueue refuses before it reaches the
	// database, and every configuration it cannot run with: a job's kind,
	// args, queue name or options at enqueue; a Config value out of range,
	// a nil pool, queues without workers, a kind or periodic job name
	// registered twice; a schema, queue or role name that is not a valid
	// identifier; a nil transaction; a job list cursor that JobList did not
	// return. The wrapping error says which input and why. Nothing is
	// written: trying again with the same input fails the same way.
	ErrInvalid = errors.New("pgqueue: invalid")

	// ErrTooLarge is returned when a job's encoded args exceed
	// Config.MaxArgsSize (at enqueue), or a handler's recorded output or
	// progress exceeds Config.MaxOutputSize. It also matches ErrInvalid.
	ErrTooLarge error = &narrowError{msg: "pgqueue: too large", broad: ErrInvalid}

	// ErrDependencyCycle is returned by the Enqueue calls when the
	// dependencies of a batch's jobs form a cycle (a job waiting, directly
	// or through others, for itself): nothing is written. The wrapping
	// error names a job of the cycle. It also matches ErrInvalid.
	ErrDependencyCycle error = &narrowError{msg: "pgqueue: dependency cycle", broad: ErrInvalid}

	// ErrDependencyNotFound is returned by the Enqueue calls when a job
	// depends on a job that does not exist: an id no job has (never
	// inserted, or deleted), a position outside the batch, or a name no
	// job of the batch has. Nothing is written. It also matches
	// ErrInvalid.
	ErrDependencyNotFound error = &narrowError{msg: "pgqueue: dependency not found", broad: ErrInvalid}

	// ErrWorkflowLimit is returned by the Enqueue calls when a job would
	// depend on more than MaxJobDependencies jobs, or a workflow would
	// hold more than MaxWorkflowJobs jobs. Nothing is written. It also
	// matches ErrInvalid.
	ErrWorkflowLimit error = &narrowError{msg: "pgqueue: workflow limit exceeded", broad: ErrInvalid}

	// ErrWorkflowNotFound is returned by WorkflowGet, and by the Enqueue
	// calls for a job whose EnqueueOpts.Workflow names it, when no job
	// belongs to the workflow id: it never existed, or all its jobs were
	// deleted (by JobDelete or by retention).
	ErrWorkflowNotFound = errors.New("pgqueue: workflow not found")

	// ErrSchemaOutdated is returned by Start when the schema's migrations
	// are older than this version of pgqueue needs (or none, or a failed
	// one): run Migrate first.
	ErrSchemaOutdated = errors.New("pgqueue: schema outdated")

	// ErrUnknownKind is the error of a claimed job whose kind has no worker
	// in the client's Workers: it is logged with the job, and its text is
	// recorded in the job's errors. The job is not failed: it waits
	// Config.UnknownKindDelay, attempt unspent, and is offered again, since
	// a newer deploy may know the kind; after Config.UnknownKindMaxTries
	// such tries it is discarded.
	ErrUnknownKind = errors.New("pgqueue: no worker for job kind")

	// ErrJobLeaseLost is returned by CompleteTx, and is the cause of a
	// running job's context cancellation, when the worker's claim on the
	// job is lost: the job no longer carries the worker's fence token or is
	// no longer running (it was rescued after its job lease expired, or an
	// operator changed it), or the worker could not renew the job lease
	// before it ran out. Nothing a stale worker writes about the job
	// reaches the row. (Locks say the same with pglock.ErrLost.)
	ErrJobLeaseLost = errors.New("pgqueue: job lease lost")

	// ErrJobCancelled is the cause of a running job's context cancellation
	// after JobCancel asked for it: the job ends cancelled, not retried.
	ErrJobCancelled = errors.New("pgqueue: job cancelled")

	// ErrStopping is the cause of the context cancellation a running job
	// sees when Stop's deadline passed before it finished. The job is
	// handed back to the queue without spending an attempt.
	ErrStopping = errors.New("pgqueue: client stopping")
)

// narrowError is a sentinel that also matches a broader one.
type narrowError struct {
	msg   string
	broad error
}

func (e *narrowError) Error() string { return e.msg }

// Is reports whether target is the broader sentinel.
func (e *narrowError) Is(target error) bool { return target == e.broad }
