// Package etcdlock is a lock in etcd with fence tokens, implementing
// package locks' [locks.Locker], in a Go module of its own so that the
// pgqueue core pulls no etcd client.
//
// It is the official client's concurrency.Mutex on a session of its own
// per acquisition: a lease of TTL seconds that the client keeps alive,
// and a key under the lock's prefix bound to it. etcd grants the mutex to
// the key created first, so waiters are served in order, and a waiter
// wakes as soon as the key before it is deleted. The fence token is the
// create revision of the acquisition's key: etcd's revisions only grow,
// and keys are granted in the order of their creation, so each holder's
// token is higher than the one before, and stays so across restarts of
// etcd, which keeps its revisions on disk.
//
// A held [Lock]'s context is cancelled with [locks.ErrLost] when its
// session ends (the lease expired or was revoked: the client saw no
// keep-alive answer within the TTL, or etcd answered that the lease is
// gone) or when its key is deleted. The lock alone does not stop a holder
// that paused past its TTL: fence every write made under it, for instance
// with pglock.CheckFenceTx in the write's PostgreSQL transaction, or, for
// data kept in etcd, with a transaction that compares the key's create
// revision ([Lock.Key]).
package etcdlock
