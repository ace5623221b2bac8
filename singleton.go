package pgqueue

import "github.com/pgqueue/pgqueue/internal/executor"

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
func SingletonResource(key string) string { return executor.SingletonResource(key) }
