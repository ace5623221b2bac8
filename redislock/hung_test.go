package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pgqueue/pgqueue/locks"
	"github.com/pgqueue/pgqueue/redislock"
)

// docsClient is a client made as the docs' example makes one: only the
// address, so ContextTimeoutEnabled is off and go-redis ignores context
// deadlines, blocking a read for its whole ReadTimeout (3s).
func docsClient(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestHungRenewalEndsContextByValidity holds a lock through a proxy whose
// link then hangs: the renewal in flight blocks for the client's read
// timeout. The holder's context must end by its validity deadline (the
// last renewal sent, plus the TTL, less the safety margin), before a
// second holder, reaching Redis directly, gets the lock once the key
// expires.
func TestHungRenewalEndsContextByValidity(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "a hung renewal ending the context by validity")
	ctx := t.Context()
	const ttl, margin = 2 * time.Second, 400 * time.Millisecond
	opts := &redislock.Options{TTL: ttl, RenewInterval: 300 * time.Millisecond, SafetyMargin: margin}
	p := startProxy(t, shared.addr)
	a, err := redislock.New(docsClient(t, p.addr), t.Name(), opts)
	if err != nil {
		t.Fatal(err)
	}
	held, err := a.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	time.Sleep(time.Second) // a few renewals through the link

	ended := make(chan time.Time, 1)
	go func() {
		<-held.Context().Done()
		ended <- time.Now()
	}()
	paused := time.Now()
	p.pause()
	defer p.resume()

	b := newLocker(t, shared, t.Name(), opts)
	next, err := b.Lock(ctx) // granted when A's key expires
	if err != nil {
		t.Fatal(err)
	}
	acquired := time.Now()
	defer next.Release(ctx)

	var end time.Time
	select {
	case end = <-ended:
	case <-time.After(15 * time.Second):
		t.Fatal("the holder's context did not end 15s after its link hung")
	}
	t.Logf("link hung at 0; holder's context ended at %s; next holder got the lock at %s",
		end.Sub(paused).Round(time.Millisecond), acquired.Sub(paused).Round(time.Millisecond))
	if !end.Before(acquired) {
		t.Errorf("the holder's context ended %s after the next holder got the lock: both held it",
			end.Sub(acquired).Round(time.Millisecond))
	}
	// The last renewal that got through was sent before the pause, so the
	// validity ended no later than TTL less the margin after it; 200ms is
	// the scheduler's slack, far less than the margin.
	if limit := ttl - margin + 200*time.Millisecond; end.Sub(paused) > limit {
		t.Errorf("the holder's context ended %s after its link hung, past its validity (at most %s)",
			end.Sub(paused).Round(time.Millisecond), ttl-margin)
	}
	if cause := context.Cause(held.Context()); !errors.Is(cause, locks.ErrLost) {
		t.Errorf("cause = %v, want ErrLost", cause)
	}
}

// sleepServer makes s unresponsive for d with DEBUG SLEEP, sent on a
// connection of its own; it returns once the server is asleep.
func sleepServer(t *testing.T, s *redisServer, d time.Duration) <-chan error {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.addr, ReadTimeout: d + 5*time.Second})
	done := make(chan error, 1)
	go func() {
		defer c.Close()
		done <- c.Do(context.Background(), "DEBUG", "SLEEP", d.Seconds()).Err()
	}()
	// Asleep once a PING on another connection goes unanswered for a while.
	probe := redis.NewClient(&redis.Options{Addr: s.addr, ReadTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer probe.Close()
	for range 50 {
		if err := probe.Ping(context.Background()).Err(); err != nil {
			return done
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("DEBUG SLEEP did not stall the server")
	return done
}

// TestSlowTryLockReplyIsNotHeld sends TryLock while Redis sleeps past the
// lock's TTL. The key is set when Redis wakes, but the reply arrives after
// the validity counted from its sending: TryLock must not return a Lock,
// must say why (ErrExpiredOnArrival, not ErrBusy), and must not leave the
// key to block others.
func TestSlowTryLockReplyIsNotHeld(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "a slow TryLock reply not held")
	s := privateRedis(t)
	ctx := t.Context()
	opts := &redislock.Options{TTL: time.Second, RenewInterval: 200 * time.Millisecond, SafetyMargin: 200 * time.Millisecond}
	l, err := redislock.New(docsClient(t, s.addr), t.Name(), opts)
	if err != nil {
		t.Fatal(err)
	}
	slept := sleepServer(t, s, 1500*time.Millisecond)
	lock, err := l.TryLock(ctx)
	if err == nil {
		t.Errorf("TryLock whose reply came after its validity returned a Lock (context error %v)", context.Cause(lock.Context()))
		_ = lock.Release(ctx)
	} else if !errors.Is(err, redislock.ErrExpiredOnArrival) || errors.Is(err, redislock.ErrBusy) {
		t.Errorf("TryLock = %v, want ErrExpiredOnArrival (and not ErrBusy)", err)
	}
	if err := <-slept; err != nil {
		t.Fatal(err)
	}
	again, err := l.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the late reply = %v: the late acquisition's key was left behind", err)
	}
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSlowLockReplyTriesAgain waits in Lock behind a holder while Redis
// sleeps past the TTL: the holder's key expires, and the waiter's attempt
// gets a reply after its validity. Lock must try again and return a Lock
// that is held (its context alive, and kept alive by its renewals), never a
// Lock whose context has already ended.
func TestSlowLockReplyTriesAgain(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "a slow Lock reply tried again")
	s := privateRedis(t)
	ctx := t.Context()
	opts := &redislock.Options{TTL: time.Second, RenewInterval: 200 * time.Millisecond, SafetyMargin: 200 * time.Millisecond}
	first := newLocker(t, s, t.Name(), &redislock.Options{TTL: time.Second, RenewInterval: 200 * time.Millisecond, SafetyMargin: 200 * time.Millisecond})
	holder, err := first.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l, err := redislock.New(docsClient(t, s.addr), t.Name(), opts)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lock locks.Lock
		err  error
	}
	got := make(chan result, 1)
	go func() {
		lock, err := l.Lock(ctx)
		got <- result{lock, err}
	}()
	time.Sleep(100 * time.Millisecond) // the waiter polls
	slept := sleepServer(t, s, 2*time.Second)
	var r result
	select {
	case r = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("Lock did not return")
	}
	if err := <-slept; err != nil {
		t.Fatal(err)
	}
	_ = holder.Release(ctx) // lost during the sleep
	if r.err != nil {
		t.Fatalf("Lock = %v", r.err)
	}
	defer r.lock.Release(ctx)
	if err := r.lock.Context().Err(); err != nil {
		t.Fatalf("Lock returned a Lock whose context has ended: %v", context.Cause(r.lock.Context()))
	}
	time.Sleep(2 * opts.TTL) // renewed past its TTL
	if err := r.lock.Context().Err(); err != nil {
		t.Fatalf("the Lock's context ended: %v", context.Cause(r.lock.Context()))
	}
	if r.lock.Fence() <= holder.Fence() {
		t.Errorf("fence %d, want > %d", r.lock.Fence(), holder.Fence())
	}
}
