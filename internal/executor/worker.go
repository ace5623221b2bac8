package executor

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// Worker is a registered handler with its type erased: pgqueue.AddWorker
// builds one per kind.
type Worker struct {
	// Timeout bounds each run; zero means Config.JobTimeout, negative none.
	Timeout time.Duration
	// SessionLock: singleton jobs of this kind hold their key's lock as a
	// session lock (SingletonSession), not in a transaction.
	SessionLock bool
	// Retry is the kind's retry policy; nil means the executor's.
	Retry RetryPolicy
	// Middleware wraps the handler, inside Config.Middleware.
	Middleware []WorkMiddleware
	// Decode turns a claimed row into the *Job[T] that Work takes. The
	// producer decodes, not the executor: decoding JSON grows a goroutine's
	// stack, and a thousand executors, their stacks shrunk again at every
	// GC, would each pay for copying it.
	Decode func(row *pgqueuetype.JobRow) (any, error)
	// Work runs the handler on what Decode returned.
	Work func(ctx context.Context, job any, grant LockGrant) error
}

// LockGrant is what the executor hands a singleton job's handler: the
// transaction holding its lock (SingletonXact), and the lock's fence.
type LockGrant struct {
	Tx    pgx.Tx
	Fence int64
}

// RetryPolicy mirrors pgqueue.RetryPolicy.
type RetryPolicy interface {
	NextRetry(attempt int, err error) time.Duration
}

// WorkMiddleware mirrors pgqueue.WorkMiddleware.
type WorkMiddleware interface {
	Work(ctx context.Context, job *pgqueuetype.JobRow, next func(ctx context.Context) error) error
}

// runWork runs handler, wrapped in the client's and then the worker's
// work middleware, for row.
func runWork(ctx context.Context, row *pgqueuetype.JobRow, handler func(ctx context.Context) error, layers ...[]WorkMiddleware) error {
	h := handler
	for l := len(layers) - 1; l >= 0; l-- {
		mws := layers[l]
		for i := len(mws) - 1; i >= 0; i-- {
			m, next := mws[i], h
			h = func(ctx context.Context) error { return m.Work(ctx, row, next) }
		}
	}
	return h(ctx)
}
