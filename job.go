package pgqueue

import (
	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/flatjson"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// The basic types live in package pgqueuetype, which the machinery shares;
// these aliases are the names programs use.
type (
	// JobArgs is implemented by the argument type of each kind of job
	// (see pgqueuetype.JobArgs).
	JobArgs = pgqueuetype.JobArgs
	// JobRow is a job as stored, with its args still encoded.
	JobRow = pgqueuetype.JobRow
	// JobState is the state of a job row.
	JobState = pgqueuetype.JobState
	// AttemptError is one entry of a job's error history.
	AttemptError = pgqueuetype.AttemptError
	// Outcome is how an attempt of a job ended.
	Outcome = pgqueuetype.Outcome
	// PanicError is the error of an attempt whose handler or work
	// middleware panicked.
	PanicError = pgqueuetype.PanicError
	// RescuedJob is a job the maintenance leader rescued, as
	// Observer.Rescued sees it.
	RescuedJob = pgqueuetype.RescuedJob
	// FencedWrite names a write about a claimed job that its fence can
	// refuse, as Observer.WriteRefused reports it.
	FencedWrite = pgqueuetype.FencedWrite
)

// The fenced writes a client makes about the jobs it runs.
const (
	WriteResult    = pgqueuetype.WriteResult
	WriteHeartbeat = pgqueuetype.WriteHeartbeat
)

// The job states. completed, discarded and cancelled are final.
const (
	StateBlocked   = pgqueuetype.StateBlocked
	StateScheduled = pgqueuetype.StateScheduled
	StateAvailable = pgqueuetype.StateAvailable
	StateRunning   = pgqueuetype.StateRunning
	StateCompleted = pgqueuetype.StateCompleted
	StateDiscarded = pgqueuetype.StateDiscarded
	StateCancelled = pgqueuetype.StateCancelled
)

// The outcomes of an attempt (see pgqueuetype.Outcome for which part
// reports which).
const (
	OutcomeCompleted = pgqueuetype.OutcomeCompleted
	OutcomeFailed    = pgqueuetype.OutcomeFailed
	OutcomeRetried   = pgqueuetype.OutcomeRetried
	OutcomeDiscarded = pgqueuetype.OutcomeDiscarded
	OutcomeCancelled = pgqueuetype.OutcomeCancelled
	OutcomeSnoozed   = pgqueuetype.OutcomeSnoozed
	OutcomeReleased  = pgqueuetype.OutcomeReleased
	OutcomeLost      = pgqueuetype.OutcomeLost
)

// Job is a claimed job handed to a Worker, with its args decoded.
type Job[T JobArgs] struct {
	*JobRow
	// Args is the decoded args.
	Args T
	// Tx is the transaction that holds a singleton job's lock in
	// SingletonXact mode; nil otherwise. Do the job's database work in it:
	// pgqueue completes the job in it and commits it when the handler
	// returns nil, and rolls it back otherwise.
	Tx pgx.Tx
	// LockFence is the fence token of a singleton job's lock acquisition,
	// higher than every earlier holder's of the same key; 0 for ordinary
	// jobs. Job.CheckFenceTx fences the handler's writes with it.
	LockFence int64
}

// decodeArgs decodes a row's args into a T, with fast when it is not nil
// and takes them (see flatjson), else as json.Unmarshal does.
func decodeArgs[T JobArgs](row *JobRow, fast *flatjson.Decoder[T]) (*Job[T], error) {
	job := &Job[T]{JobRow: row}
	if fast != nil {
		if fast.Decode(row.EncodedArgs, &job.Args) {
			return job, nil
		}
		var zero T
		job.Args = zero
	}
	if err := unmarshalArgs(row.EncodedArgs, &job.Args); err != nil {
		return nil, err
	}
	return job, nil
}
