// Package redislock is a lock in one Redis with fence tokens, implementing
// package locks' [locks.Locker], in a Go module of its own so that the
// pgqueue core pulls no Redis client.
//
// An acquisition is one Lua script: SET key token NX PX ttl with a random
// token of its own, and, when that succeeded, INCR on the lock's counter
// key, whose new value is the fence token. Renewal (PEXPIRE) and release
// (DEL) are scripts that compare the token first, so a holder whose key
// expired and was taken can neither extend nor delete its successor's
// key. A held [Lock] renews itself every RenewInterval; its context is
// cancelled with [locks.ErrLost] when a renewal finds the key gone or
// holding another token (it expired, Redis restarted empty, a failover
// lost it), or when no renewal got through and the TTL less SafetyMargin
// has passed since the last one was sent.
//
// That validity deadline is kept by a timer, not between renewals, so the
// context ends on time when Redis or the link hangs rather than fails:
// go-redis ignores context deadlines unless ContextTimeoutEnabled is set,
// and a renewal then blocks for the client's whole read timeout, yet the
// lock's context ends at its deadline whatever the client's options. For
// the same reason an acquisition whose reply arrives after its own
// validity (counted from its sending) is not held: TryLock deletes the key
// and returns [ErrExpiredOnArrival], and Lock tries again.
//
// A missing counter starts at the Redis server's clock in microseconds,
// not at 0, so a Redis that restarts without its data still hands out
// tokens higher than the ones before, and check_fence lets the new holders
// write; a Redis whose clock went back across such a restart would not.
//
// The lock alone does not stop a holder that paused past its TTL (a GC
// pause, SIGSTOP, a slow network): fence every write made under it, for
// instance with pglock.CheckFenceTx in the write's PostgreSQL transaction.
// There is no Redlock: docs/guides/lock-backends.md says why one Redis and fence tokens
// checked where the data lives are the safer design.
//
// [Locker.Lock] polls, from 10ms doubling up to MaxPollInterval; waiters
// are served in no particular order.
package redislock
