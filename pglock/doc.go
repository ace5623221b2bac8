// Package pglock provides locks held in PostgreSQL, for processes and hosts
// that share one database: transaction and session advisory locks, lease
// locks, and leader election on a lease lock.
//
// A [Locker] needs only a *pgxpool.Pool and a schema migrated by
// pgqueue.Migrate, which holds the fence sequence, the leases table and
// check_fence; it needs no pgqueue.Client:
//
//	locker, err := pglock.New(pool, &pglock.Config{Schema: "pgqueue"})
//
// Every call that waits takes a context and ends with it. Errors wrap the
// sentinels of this package; match them with [errors.Is].
//
// # Vocabulary
//
// These words mean the same in pglock, in pgqueue and in their docs.
//
//   - Lock: a hold on a name. As the database sees it, at most one
//     holder has a name's lock at a time.
//   - Fence token (fence): the number every acquisition draws from
//     <schema>.fence_seq. Tokens increase strictly across all locks and
//     all job claims of a schema, so a later holder always has a higher
//     token than an earlier one. A resource that keeps the highest token
//     it has seen refuses the writes of an older holder: check the token
//     in the write's transaction with [CheckFenceTx] (or pgqueue's
//     Client.CheckFenceTx), or in SQL with
//     <schema>.check_fence(resource, token).
//   - Busy: another holder has the lock. The Try forms return [ErrBusy]
//     then, and only then; ErrBusy never stands for an I/O error.
//   - Lost: the hold ended without its holder releasing it: its session
//     died or moved, its lease expired or was taken over, its term was
//     replaced. That is [ErrLost]. Another holder may have the lock
//     already: stop acting under it at once.
//   - Released: the holder ended the hold itself (SessionLock.Unlock,
//     LeaseLock.Release, an Elector resigning). [ErrReleased] is the cause
//     of a SessionLock's context after Unlock.
//   - Lease lock: a lock that expires by the database clock unless its
//     holder renews it ([LeaseLock]). Not to be confused with a job lease,
//     pgqueue.Config.JobLease: how long a job claim stays valid, renewed by
//     the worker's heartbeats; losing a job lease is
//     pgqueue.ErrJobLeaseLost, not ErrLost.
//   - Leader, term: an [Elector] whose lease lock is held leads; its term
//     is that lease lock's fence token.
//
// # Lock kinds
//
// Transaction locks ([Locker.LockXact], [Locker.TryLockXact]) are for work
// done in one transaction: the lock is taken on the caller's transaction
// and released when it commits or rolls back, or when its session ends.
// There is nothing to unlock and no expiry.
//
// Session locks ([Locker.LockSession], [Locker.TryLockSession]) are for
// work that spans transactions but should hold a lock that dies with its
// holder. The lock lives on a dedicated pgx.Conn, dialled with the pool's
// configuration and pinned to the lock until [SessionLock.Unlock]; it
// never goes through the pool, which would hand the unlock to another
// session. A keepalive checks the connection: when it died, or a pooler
// moved it to another server session, the lock is lost, Lost is closed and
// Context is cancelled with cause ErrLost. Session locks need a session of
// their own: through a pooler such as PgBouncer they fail with
// [ErrNoSessionAffinity] every time, unless [Config].DirectConnConfig
// gives a connection to PostgreSQL itself. Within one process a name has
// one holder at a time whatever the connections.
//
// Lease locks ([Locker.TryLockLease]) are rows of <schema>.leases naming
// the holder, its fence and its expiry. Acquire, renew and release are one
// statement each and keep no session state, so lease locks work through
// PgBouncer in transaction mode and across reconnects. An expired lease
// lock can be taken over. The holder renews it before
// [LeaseLock.ValidUntil] and fences its writes: nothing stops a holder
// that paused past its expiry.
//
// # One API across backends
//
// [Locker.SessionLocker], [Locker.XactLocker] and [Locker.LeaseLocker]
// return the three kinds as a locks.Locker, the interface that the file,
// Redis and etcd locks implement too: Lock, TryLock, and a held Lock's
// Fence, Context (cancelled when lost or released) and Release. The lease
// kind renews itself in the background there. [CheckFenceTx] fences a
// write in PostgreSQL with a token from any of them, given only a
// transaction and the schema.
//
// # Leader election
//
// An [Elector] campaigns for a lease lock and, while it holds it, runs a
// function with the term and a context that is cancelled, with cause
// ErrLost, when a renewal finds the term taken over or the lease comes
// within the safety margin of its end unrenewed. When the context of
// [Elector.Run] ends, or the function returns, the term is resigned at
// once, so a follower need not wait for the expiry; [Elector.Nudge] makes a
// follower campaign at once. Leaders can still overlap in time (one paused
// past its lease): fence every write a leader makes with its term.
//
// # Keys
//
// Transaction and session locks are advisory locks on the two-int4 [Key]
// that [Locker.Key] derives from the schema and the name; the two kinds
// share a name's key and exclude each other. This key space is apart from
// the one-bigint form most applications and golang-migrate use, and each
// schema has a key class of its own. Lease locks are rows, not advisory
// locks: a lease lock and an advisory lock of the same name do not
// exclude each other.
package pglock
