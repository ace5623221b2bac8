package pgqueuetype

import "fmt"

// Outcome is how an attempt of a job ended. Two parts of pgqueue report
// it, each with the outcomes it can know:
//
//   - OutcomeOf, for work middleware, from the error the attempt returned
//     and its context: OutcomeCompleted, OutcomeFailed (retry or discard is
//     decided after the middleware), OutcomeSnoozed, OutcomeCancelled,
//     OutcomeReleased (the client stopped) and OutcomeLost.
//   - Observer.Recorded and pgqueuetest, once the attempt's result is
//     written: OutcomeCompleted, OutcomeRetried, OutcomeDiscarded,
//     OutcomeCancelled, OutcomeSnoozed and OutcomeReleased.
type Outcome string

// The outcomes of an attempt.
const (
	// OutcomeCompleted: the attempt returned nil (or the handler completed
	// the job with CompleteTx); the job is completed.
	OutcomeCompleted Outcome = "completed"
	// OutcomeFailed: the attempt returned an error or panicked. Whether the
	// job is retried or discarded is decided after the middleware.
	OutcomeFailed Outcome = "failed"
	// OutcomeRetried: the attempt failed; the job runs again later.
	OutcomeRetried Outcome = "retried"
	// OutcomeDiscarded: the attempt failed and the job was discarded (its
	// attempts used up, an error handler's decision, an unknown kind's
	// last try).
	OutcomeDiscarded Outcome = "discarded"
	// OutcomeCancelled: the attempt returned JobCancel, or JobCancel asked
	// for the job to be cancelled; the job ends cancelled.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeSnoozed: the job runs again later, its attempt given back
	// (JobSnooze, a held singleton key, a kind no worker here knows).
	OutcomeSnoozed Outcome = "snoozed"
	// OutcomeReleased: the job was handed back unrun, or cut short because
	// the client stopped (ErrStopping); its attempt is given back.
	OutcomeReleased Outcome = "released"
	// OutcomeLost: the attempt ended because its claim was lost
	// (ErrJobLeaseLost); nothing is recorded, another claim took the job.
	OutcomeLost Outcome = "lost"
)

// PanicError is the error of an attempt whose handler or work middleware
// panicked: the value it panicked with and the goroutine's stack. The job
// records its text ("panic: " and the value) and the stack.
type PanicError struct {
	// Value is what was passed to panic.
	Value any
	// Stack is the stack of the panicking goroutine.
	Stack string
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic's value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// FencedWrite names a write about a claimed job that the job's fence can
// refuse, as Observer.WriteRefused reports it.
type FencedWrite string

// The fenced writes a client makes about the jobs it runs.
const (
	// WriteResult records an attempt's result (completed, failed,
	// snoozed, cancelled, handed back).
	WriteResult FencedWrite = "result"
	// WriteHeartbeat renews a running job's lease.
	WriteHeartbeat FencedWrite = "heartbeat"
)
