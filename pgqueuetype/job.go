package pgqueuetype

import "time"

// JobArgs is implemented by the argument type of each kind of job. The args
// are stored as JSON, so the type must encode with encoding/json.
//
// Kind names the job kind. It is stored with the job and used to find its
// worker, so it must be a stable string (never derived from the Go type's
// name) and must be callable on the zero value: give it a value receiver on
// a struct type.
type JobArgs interface {
	Kind() string
}

// JobState is the state of a job row.
//
//	blocked ──(parents completed)──┐
//	                               ▼
//	scheduled ──(run_at due)──▶ available ──(claim)──▶ running ──▶ completed
//	    ▲                                                 │  ├──▶ cancelled
//	    └──────────── retry after backoff / snooze ◀──────┘  └──▶ discarded
type JobState string

// The job states. completed, discarded and cancelled are final.
const (
	// StateBlocked jobs wait for the jobs they depend on to complete
	// (EnqueueOpts.DependsOn); the last parent's completion makes them
	// available (or scheduled, when their RunAt is ahead). No claim
	// reads them.
	StateBlocked JobState = "blocked"
	// StateScheduled jobs wait for run_at: a future first run, a retry
	// after backoff, or a snooze.
	StateScheduled JobState = "scheduled"
	// StateAvailable jobs are due and wait for a worker.
	StateAvailable JobState = "available"
	// StateRunning jobs are claimed by a worker that holds their fence.
	StateRunning JobState = "running"
	// StateCompleted jobs finished successfully.
	StateCompleted JobState = "completed"
	// StateDiscarded jobs failed their last allowed attempt.
	StateDiscarded JobState = "discarded"
	// StateCancelled jobs were ended by JobCancel (or an operator) without
	// further attempts.
	StateCancelled JobState = "cancelled"
)

// Final reports whether s is a state a job never leaves by itself.
func (s JobState) Final() bool {
	return s == StateCompleted || s == StateDiscarded || s == StateCancelled
}

// AttemptError is one entry of a job's error history: a failed attempt, a
// cancellation reason or a note on why the job waits (an unknown kind).
type AttemptError struct {
	// Attempt is the attempt number the entry belongs to.
	Attempt int `json:"attempt"`
	// At is when it was recorded, by the database clock.
	At time.Time `json:"at"`
	// Error is the error's text.
	Error string `json:"error"`
	// Trace is the stack of a panic, empty otherwise.
	Trace string `json:"trace,omitempty"`
	// UnknownKind marks an entry recorded because the client that claimed
	// the job had no worker for its kind: these entries count the tries
	// toward Config.UnknownKindMaxTries.
	UnknownKind bool `json:"unknown_kind,omitempty"`
}

// JobRow is a job as stored, with its args still encoded.
type JobRow struct {
	// ID identifies the job.
	ID int64
	// Queue is the queue the job belongs to.
	Queue string
	// Kind is the kind from JobArgs.Kind.
	Kind string
	// EncodedArgs is the args as stored JSON.
	EncodedArgs []byte
	// Priority orders jobs within a queue: lower runs first.
	Priority int16
	// State is the state when the row was read.
	State JobState
	// Attempt counts the attempts started so far, this one included.
	Attempt int
	// MaxAttempts is the number of attempts after which a failing job is
	// discarded.
	MaxAttempts int
	// RunAt is when the job is or was due.
	RunAt time.Time
	// Fence is the token of the current claim: it grows strictly with every
	// claim of any job. Writes about the job must name it; pass it on to
	// fence writes of your own. Zero before the first claim.
	Fence int64
	// LeaseUntil is when the current claim's lease ends, by the database
	// clock. Zero when the job is not running.
	LeaseUntil time.Time
	// WorkerID names the client that claimed the job last.
	WorkerID string
	// Errors is the history of failed attempts, oldest first.
	Errors []AttemptError
	// Tags are free labels set at enqueue.
	Tags []string
	// Meta is free JSON set at enqueue.
	Meta []byte
	// CreatedAt is when the job was enqueued.
	CreatedAt time.Time
	// AttemptedAt is when the current or last attempt started.
	AttemptedAt time.Time
	// FinalizedAt is when the job reached a final state.
	FinalizedAt time.Time
	// SingletonKey is the job's singleton key, empty for ordinary jobs.
	SingletonKey string
	// PartitionKey is the key the job was enqueued with for its queue's
	// per-key flow limits, empty for none (the queue may still derive one
	// from the kind or args when it claims).
	PartitionKey string
	// SequenceKey is the job's sequence: the jobs of a queue with the same
	// key run one at a time, in the order they were inserted. Empty for
	// none.
	SequenceKey string
	// CancelRequestedAt is when JobCancel asked for the running job to be
	// cancelled; zero if it never was. Read by JobGet, JobList and the
	// control calls (JobCancel, JobRetry, JobDelete); a claimed job's row
	// leaves it zero.
	CancelRequestedAt time.Time
	// Output is the JSON the handler last recorded with RecordOutput, nil
	// if none. Read like CancelRequestedAt.
	Output []byte
	// Progress is the JSON the handler last recorded with RecordProgress,
	// nil if none. Read like CancelRequestedAt.
	Progress []byte
}

// RescuedJob is a job the maintenance leader rescued after its lease
// expired, as Observer.Rescued sees it.
type RescuedJob struct {
	// ID identifies the job.
	ID int64
	// Queue and Kind are the job's.
	Queue, Kind string
	// Holder is the ID of the client whose lease expired.
	Holder string
	// State is the job's state after the rescue: scheduled, or discarded
	// (out of attempts) or cancelled (JobCancel asked for it).
	State JobState
}
