package pgqueue

import (
	"errors"
	"time"

	"github.com/pgqueue/pgqueue/internal/executor"
)

// What a handler's error means besides "failed, retry": these two end the
// attempt differently (the executor's CancelError and SnoozeError).

// JobCancel, returned by a handler, ends the job as cancelled with no
// further attempts; err's text is kept in the job's errors. A nil err
// records "cancelled".
func JobCancel(err error) error {
	if err == nil {
		err = errors.New("cancelled")
	}
	return &executor.CancelError{Err: err}
}

// JobSnooze, returned by a handler, puts the job back to run again after d
// without spending an attempt. d ≤ 0 makes it available at once.
func JobSnooze(d time.Duration) error {
	return &executor.SnoozeError{After: d}
}
