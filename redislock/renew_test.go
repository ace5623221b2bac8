package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue/redislock"
)

// TestRenewalOfATakenKeyLosesTheLock lets a holder's key vanish (as if it
// expired while the holder was paused) and another holder take it: the
// first holder's next renewal must find the key not its own and lose the
// lock, leaving the new holder's key and TTL alone.
func TestRenewalOfATakenKeyLosesTheLock(t *testing.T) {
	ctx := context.Background()
	opts := &redislock.Options{TTL: 3 * time.Second, RenewInterval: 100 * time.Millisecond}
	stale := newLocker(t, shared, t.Name(), opts)
	first, err := stale.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Release(ctx)
	client := shared.client(t)
	if err := client.Del(ctx, stale.Key()).Err(); err != nil {
		t.Fatal(err)
	}
	second, err := newLocker(t, shared, t.Name(), &redislock.Options{TTL: time.Minute}).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release(ctx)
	select {
	case <-first.Context().Done():
		if !errors.Is(context.Cause(first.Context()), redislock.ErrLost) {
			t.Fatalf("first holder's cause %v, want ErrLost", context.Cause(first.Context()))
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the first holder's renewals of a key another holder took did not lose the lock")
	}
	if ttl := client.PTTL(ctx, stale.Key()).Val(); ttl < 50*time.Second {
		t.Fatalf("the new holder's key has %s left of its minute: the stale holder renewed it", ttl)
	}
	if second.Context().Err() != nil {
		t.Fatalf("the new holder lost its lock: %v", context.Cause(second.Context()))
	}
}
