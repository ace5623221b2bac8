package etcdlock_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/pgqueue/pgqueue/etcdlock"
	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/locks"
	"github.com/pgqueue/pgqueue/locks/lockstest"
	"github.com/pgqueue/pgqueue/pglock/fencetest"
)

// Child processes are this test binary run again with -test.run selecting
// TestHelperProcess and roleEnv naming what to do; arguments follow "--".
const roleEnv = "ETCDLOCK_TEST_ROLE"

func newLocker(t testing.TB, c *clientv3.Client, name string, ttl time.Duration) *etcdlock.Locker {
	t.Helper()
	l, err := etcdlock.New(c, name, &etcdlock.Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestContract(t *testing.T) {
	t.Parallel()
	lockstest.Run(t, func(t *testing.T) locks.Locker {
		return newLocker(t, shared.client(t), t.Name(), 5*time.Second)
	})
}

func TestOptions(t *testing.T) {
	t.Parallel()
	if _, err := etcdlock.New(shared.client(t), "x", &etcdlock.Options{TTL: -time.Second}); !errors.Is(err, etcdlock.ErrInvalidOption) {
		t.Fatalf("negative TTL: %v, want ErrInvalidOption", err)
	}
	if _, err := etcdlock.New(shared.client(t), "x", &etcdlock.Options{TTL: 2 * time.Second, RenewInterval: time.Second, SafetyMargin: time.Second}); !errors.Is(err, etcdlock.ErrInvalidOption) {
		t.Fatalf("RenewInterval + SafetyMargin = TTL: %v, want ErrInvalidOption", err)
	}
}

// TestKeyDeletedLosesLock deletes the holder's key behind its back: its
// context ends with ErrLost, and the next holder's token is higher.
func TestKeyDeletedLosesLock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := shared.client(t)
	l := newLocker(t, c, "deleted", 5*time.Second)
	held, err := l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, held.(*etcdlock.Lock).Key()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("holder not told its key was deleted")
	}
	if cause := context.Cause(held.Context()); !errors.Is(cause, locks.ErrLost) {
		t.Fatalf("cause = %v, want ErrLost", cause)
	}
	if err := held.Release(ctx); !errors.Is(err, locks.ErrLost) {
		t.Fatalf("Release = %v, want ErrLost", err)
	}
	next, err := l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release(ctx)
	if next.Fence() <= held.Fence() {
		t.Fatalf("next token %d, want > %d", next.Fence(), held.Fence())
	}
}

// TestServerKilled kills etcd under a holder: TryLock fails with the
// network error, not ErrBusy, and the holder's context ends with ErrLost
// once its lease could not be kept alive.
func TestServerKilled(t *testing.T) {
	t.Parallel()
	s := privateEtcd(t)
	ctx := t.Context()
	l := newLocker(t, s.client(t), "killed", 2*time.Second)
	held, err := l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.kill()
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if lock, err := l.TryLock(tctx); err == nil || errors.Is(err, locks.ErrBusy) {
		if err == nil {
			_ = lock.Release(ctx)
		}
		t.Fatalf("TryLock with etcd down = %v, want a network error, not ErrBusy", err)
	}
	select {
	case <-held.Context().Done():
	case <-time.After(20 * time.Second):
		t.Fatal("holder not told of the loss 20s after the kill")
	}
	if cause := context.Cause(held.Context()); !errors.Is(cause, locks.ErrLost) {
		t.Fatalf("cause = %v, want ErrLost", cause)
	}
	_ = held.Release(ctx)
}

// TestPausedHolderFenced stops a holder (a child process) with SIGSTOP past
// its session's TTL, while this process takes the lock over and writes with
// its token. Resumed, the old holder writes with its stale token:
// check_fence refuses it; its lease is gone and its lock's context ends
// with ErrLost. The scenario is fencetest.PausedHolder's.
func TestPausedHolderFenced(t *testing.T) {
	t.Parallel()
	db := pgtest.DB().NewDatabase(t)
	cmd := lockstest.HelperCmd(roleEnv, "paused", shared.endpoint, "paused", db)
	fencetest.PausedHolder(t, db, cmd, func(ctx context.Context) (locks.Lock, error) {
		l := newLocker(t, shared.client(t), "paused", 10*time.Second)
		return l.Lock(ctx) // granted once the stopped holder's lease expires
	})
}

// childPaused holds the lock on a 2s session (etcd's shortest lease) and
// runs fencetest.HoldPaused: after the parent stopped and resumed it and
// said "write", it writes with its token whatever its lock says, then
// reports the write, the loss and the release.
func childPaused(endpoint, name, db string) int {
	ctx := context.Background()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	l, err := etcdlock.New(c, name, &etcdlock.Options{TTL: 2 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	lock, err := l.TryLock(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return fencetest.HoldPaused(ctx, lock, db)
}

// TestHelperProcess is not a test: it is the body of the child processes
// the other tests start, and returns at once when run as a test.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(roleEnv)
	if role == "" {
		return
	}
	args := flag.Args()
	code := 0
	switch role {
	case "paused":
		code = childPaused(args[0], args[1], args[2])
	default:
		fmt.Fprintf(os.Stderr, "unknown role %q\n", role)
		code = 2
	}
	os.Exit(code)
}
