package pgqueue

import (
	"errors"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

// rolledBackAttempts is how many times in all a statement that runs in
// its own transaction is tried while PostgreSQL fails it to break a
// deadlock or a serialization conflict.
const rolledBackAttempts = 3

// againIfRolledBack runs f, and runs it again while it fails with a
// deadlock or a serialization failure, up to rolledBackAttempts times in
// all: PostgreSQL rolled the transaction back, so nothing of it was
// written. Statements that change many jobs (JobCancelMany beside the
// completions of the same jobs, above all) can meet such a cycle; see
// docs/dev/design.md, "Results are batched".
func againIfRolledBack[T any](f func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		v, err := f()
		var pgErr *pgconn.PgError
		if err == nil || attempt == rolledBackAttempts || !errors.As(err, &pgErr) ||
			(pgErr.Code != pgerrcode.DeadlockDetected && pgErr.Code != pgerrcode.SerializationFailure) {
			return v, err
		}
	}
}
