package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/dberr"
	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/pglock"
)

// SingletonResource is the lock name, and the fence resource, of a
// singleton key (pgqueue.SingletonResource).
func SingletonResource(key string) string { return "singleton:" + key }

// singletonRun is the outcome of running a singleton job's handler.
type singletonRun struct {
	err   error
	trace string
	// busy: another job of the key holds the lock; the handler did not run.
	busy bool
	// release runs after the job's result is recorded; may be nil.
	release func()
}

// singletonRunner runs the handlers of singleton jobs under their key's
// lock, taken through pglock like any user would.
type singletonRunner struct {
	pool  *pgxpool.Pool
	q     *jobsql.Queries
	locks *pglock.Locker
	log   *slog.Logger
	// jobLease bounds how long a SingletonXact transaction may sit idle.
	jobLease time.Duration
}

// run takes the job's key lock in its worker's mode and runs the handler
// under it. ctx is the job's context (ended by lease loss or Stop);
// handlerCtx adds the handler's timeout; cancel cancels ctx (and handlerCtx).
func (r *singletonRunner) run(ctx, handlerCtx context.Context, cancel context.CancelCauseFunc, job *ActiveJob, cj *ClaimedJob) singletonRun {
	row, w := job.row, cj.w
	name := SingletonResource(row.SingletonKey)
	if w.SessionLock {
		lock, err := r.locks.TryLockSession(ctx, name, nil)
		if errors.Is(err, pglock.ErrBusy) {
			return singletonRun{busy: true}
		}
		if err != nil {
			return singletonRun{err: err}
		}
		release := func() {
			uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), jobsql.WriteTimeout)
			defer ucancel()
			if err := lock.Unlock(uctx); err != nil {
				r.log.Warn("pgqueue: singleton unlock", "job", row.ID, "key", row.SingletonKey, "err", err)
			}
		}
		// Claim the resource's fence first: from here on, writes fenced
		// with an older holder's LockFence are refused.
		if _, err := r.pool.Exec(ctx, r.q.CheckFence, name, lock.Fence()); err != nil {
			release()
			return singletonRun{err: fmt.Errorf("singleton %q: record fence: %w", row.SingletonKey, err)}
		}
		stop := context.AfterFunc(lock.Context(), func() { cancel(context.Cause(lock.Context())) })
		trace, err := runHandler(handlerCtx, cj, LockGrant{Fence: lock.Fence()})
		stop()
		return singletonRun{err: err, trace: trace, release: release}
	}

	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return singletonRun{err: dberr.Wrap("pgqueue", "singleton begin", err)}
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, r.q.SetIdleTimeout, fmt.Sprint(r.jobLease.Milliseconds())); err != nil {
		return singletonRun{err: dberr.Wrap("pgqueue", "singleton set timeout", err)}
	}
	fence, err := r.locks.TryLockXact(ctx, tx, name)
	if errors.Is(err, pglock.ErrBusy) {
		return singletonRun{busy: true}
	}
	if err != nil {
		return singletonRun{err: err}
	}
	trace, err := runHandler(handlerCtx, cj, LockGrant{Tx: tx, Fence: fence})
	if err != nil {
		return singletonRun{err: err, trace: trace}
	}
	if !job.completedInTx.Load() { // unless the handler did it itself
		if err := jobsql.CompleteInTx(ctx, tx, r.q, row); err != nil {
			return singletonRun{err: err}
		}
		job.completedInTx.Store(true)
	}
	if err := tx.Commit(ctx); err != nil {
		// completedInTx is set: the executor reads the row back to learn
		// whether this commit landed.
		return singletonRun{err: dberr.Wrap("pgqueue", "singleton commit", err)}
	}
	return singletonRun{}
}
