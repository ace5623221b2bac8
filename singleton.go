package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pgqueue/pgqueue/pglock"
)

// SingletonMode is how a singleton job holds the lock of its key while it
// runs.
type SingletonMode int

const (
	// SingletonXact holds the key's lock with pg_advisory_xact_lock on a
	// transaction handed to the handler as Job.Tx. The lock dies with the
	// transaction: at commit, at rollback, or when the server ends the
	// session. The transaction runs with idle_in_transaction_session_timeout
	// set to the lease, so a holder paused longer than that (GC, SIGSTOP)
	// loses its session, its lock and its uncommitted work. The handler
	// must therefore not leave Job.Tx idle longer than Config.JobLease.
	SingletonXact SingletonMode = iota
	// SingletonSession holds the key's lock as a session advisory lock on
	// a connection dialled for it (see SessionLock), for handlers whose work
	// cannot run in one transaction. Before the handler starts, the lock's
	// fence is recorded for SingletonResource(key), so writes an earlier
	// holder fences with its older Job.LockFence are refused. The handler's
	// context is cancelled with pglock.ErrLost when the lock's connection dies.
	SingletonSession
)

// SingletonResource is the lock name, and the fence resource, of a
// singleton key.
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

// runSingleton takes the job's key lock in w's mode and runs the handler
// under it. ctx is the job's context (ended by lease loss or Stop);
// handlerCtx adds the handler's timeout.
func (c *Client) runSingleton(ctx, handlerCtx context.Context, cancel context.CancelCauseFunc, job *activeJob, cj *claimedJob) singletonRun {
	row, w := job.row, cj.w
	name := SingletonResource(row.SingletonKey)
	if w.mode == SingletonSession {
		lock, err := c.locks.TryLockSession(ctx, name, nil)
		if errors.Is(err, pglock.ErrBusy) {
			return singletonRun{busy: true}
		}
		if err != nil {
			return singletonRun{err: err}
		}
		release := func() {
			uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
			defer ucancel()
			if err := lock.Unlock(uctx); err != nil {
				c.log.Warn("pgqueue: singleton unlock", "job", row.ID, "key", row.SingletonKey, "err", err)
			}
		}
		// Claim the resource's fence first: from here on, writes fenced
		// with an older holder's LockFence are refused.
		if _, err := c.pool.Exec(ctx, c.q.checkFence, name, lock.Fence()); err != nil {
			release()
			return singletonRun{err: fmt.Errorf("singleton %q: record fence: %w", row.SingletonKey, err)}
		}
		stop := context.AfterFunc(lock.Context(), func() { cancel(context.Cause(lock.Context())) })
		trace, err := runHandler(handlerCtx, cj, lockGrant{fence: lock.Fence()})
		stop()
		return singletonRun{err: err, trace: trace, release: release}
	}

	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return singletonRun{err: dbError("singleton begin", err)}
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT set_config('idle_in_transaction_session_timeout', $1, true)", fmt.Sprint(c.config.JobLease.Milliseconds())); err != nil {
		return singletonRun{err: dbError("singleton set timeout", err)}
	}
	fence, err := c.locks.TryLockXact(ctx, tx, name)
	if errors.Is(err, pglock.ErrBusy) {
		return singletonRun{busy: true}
	}
	if err != nil {
		return singletonRun{err: err}
	}
	trace, err := runHandler(handlerCtx, cj, lockGrant{tx: tx, fence: fence})
	if err != nil {
		return singletonRun{err: err, trace: trace}
	}
	if !job.completedInTx.Load() { // unless the handler did it itself
		if err := c.CompleteTx(ctx, tx, row); err != nil {
			return singletonRun{err: err}
		}
	}
	if err := tx.Commit(ctx); err != nil {
		// completedInTx is set: the executor reads the row back to learn
		// whether this commit landed.
		return singletonRun{err: dbError("singleton commit", err)}
	}
	return singletonRun{}
}

// DefaultSingletonRetryDelay is Config.SingletonRetryDelay's default.
const DefaultSingletonRetryDelay = time.Second
