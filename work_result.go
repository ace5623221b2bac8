package pgqueue

import (
	"errors"
	"fmt"
	"time"
)

// What a handler's error means besides "failed, retry": these two end the
// attempt differently. The executor tells them apart with errors.As.

// jobCancelError ends a job without further attempts.
type jobCancelError struct{ err error }

func (e *jobCancelError) Error() string { return "job cancelled: " + e.err.Error() }
func (e *jobCancelError) Unwrap() error { return e.err }

// JobCancel, returned by a handler, ends the job as cancelled with no
// further attempts; err's text is kept in the job's errors. A nil err
// records "cancelled".
func JobCancel(err error) error {
	if err == nil {
		err = errors.New("cancelled")
	}
	return &jobCancelError{err: err}
}

// jobSnoozeError asks for another run later without spending an attempt.
type jobSnoozeError struct{ after time.Duration }

func (e *jobSnoozeError) Error() string { return fmt.Sprintf("job snoozed for %s", e.after) }

// JobSnooze, returned by a handler, puts the job back to run again after d
// without spending an attempt. d ≤ 0 makes it available at once.
func JobSnooze(d time.Duration) error {
	return &jobSnoozeError{after: d}
}
