package executor

import (
	"fmt"
	"time"
)

// What a handler's error means besides "failed, retry": these two end the
// attempt differently. The executor tells them apart with errors.As;
// pgqueue.JobCancel and pgqueue.JobSnooze make them.

// CancelError ends a job without further attempts; Err's text is kept in
// the job's errors.
type CancelError struct{ Err error }

// Error says the job was cancelled, and why.
func (e *CancelError) Error() string { return "job cancelled: " + e.Err.Error() }

// Unwrap returns the handler's reason.
func (e *CancelError) Unwrap() error { return e.Err }

// SnoozeError asks for another run After from now without spending an
// attempt.
type SnoozeError struct{ After time.Duration }

// Error says for how long the job snoozes.
func (e *SnoozeError) Error() string { return fmt.Sprintf("job snoozed for %s", e.After) }
