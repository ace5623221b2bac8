// Package etcdlock is a lock in etcd with fence tokens, implementing
// package locks' [locks.Locker], in a Go module of its own so that the
// pgqueue core pulls no etcd client.
//
// Each acquisition grants a lease of TTL seconds and queues a key bound to
// it under the lock's prefix, with the layout of the official client's
// concurrency.Mutex (prefix/<lease id in hex>), so the two exclude each
// other. etcd grants the lock to the key created first, so waiters are
// served in order, and a waiter wakes as soon as the key before it is
// deleted. The fence token is the create revision of the acquisition's
// key: etcd's revisions only grow, and keys are granted in the order of
// their creation, so each holder's token is higher than the one before,
// and stays so across restarts of etcd, which keeps its revisions on disk.
//
// The lock renews its lease itself, with one KeepAliveOnce every
// RenewInterval from the grant on, rather than through the client's
// keep-alive stream, whose channel closes only a TTL after the last
// answer: a held [Lock]'s context is cancelled with [locks.ErrLost] when a
// renewal finds the lease gone (expired or revoked), when its key is
// deleted, or when no renewal got through and the TTL less SafetyMargin
// has passed since the last one was sent. That deadline is kept by a
// timer, so the context ends on time when etcd hangs (a stopped process,
// a stalled link) as well as when it fails. A waiter whose lease ends
// while it waits starts again with a new one, and an acquisition whose
// grant arrives after its lease's validity is not held: TryLock returns
// [ErrExpiredOnArrival] and Lock starts again.
//
// The lock alone does not stop a holder that paused past its TTL: fence
// every write made under it, for instance with pglock.CheckFenceTx in the
// write's PostgreSQL transaction, or, for data kept in etcd, with a
// transaction that compares the key's create revision ([Lock.Key]).
package etcdlock
