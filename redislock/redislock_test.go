package redislock_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/locks"
	"github.com/pgqueue/pgqueue/locks/lockstest"
	"github.com/pgqueue/pgqueue/pglock/fencetest"
	"github.com/pgqueue/pgqueue/redislock"
)

// Child processes are this test binary run again with -test.run selecting
// TestHelperProcess and roleEnv naming what to do; arguments follow "--".
const roleEnv = "REDISLOCK_TEST_ROLE"

func newLocker(t testing.TB, s *redisServer, name string, opts *redislock.Options) *redislock.Locker {
	t.Helper()
	l, err := redislock.New(s.client(t), name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestContract(t *testing.T) {
	t.Parallel()
	lockstest.Run(t, func(t *testing.T) locks.Locker {
		return newLocker(t, shared, t.Name(), &redislock.Options{TTL: 5 * time.Second})
	})
}

func TestOptions(t *testing.T) {
	t.Parallel()
	if _, err := redislock.New(shared.client(t), "x", &redislock.Options{TTL: time.Second, RenewInterval: time.Second}); !errors.Is(err, redislock.ErrInvalidOption) {
		t.Fatalf("RenewInterval = TTL: %v, want ErrInvalidOption", err)
	}
}

// TestContentionAcrossProcesses runs 8 goroutines in each of 2 processes,
// taking one lock in turns. Inside the lock each creates a marker file
// with O_EXCL (which fails if another holder is inside) and appends its
// token to a log; the log must be strictly increasing.
func TestContentionAcrossProcesses(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "contention of 2 processes of 8 goroutines")
	const rounds = 10
	dir := t.TempDir()
	cmd := lockstest.HelperCmd(roleEnv, "contend", shared.addr, "contention", dir, strconv.Itoa(rounds))
	out := make(chan error, 1)
	go func() {
		b, err := cmd.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, b)
		}
		out <- err
	}()
	if err := contend(shared.addr, "contention", dir, rounds); err != nil {
		t.Error(err)
	}
	if err := <-out; err != nil {
		t.Fatalf("child: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	if want := 2 * 8 * rounds; len(lines) != want {
		t.Fatalf("%d acquisitions logged, want %d", len(lines), want)
	}
	for i := 1; i < len(lines); i++ {
		if atoi64(t, lines[i]) <= atoi64(t, lines[i-1]) {
			t.Fatalf("token %s logged after %s", lines[i], lines[i-1])
		}
	}
}

// contend is one process's share of TestContentionAcrossProcesses.
func contend(addr, name, dir string, rounds int) error {
	s := &redisServer{addr: addr}
	c := s.client(&noTB{})
	defer c.Close()
	l, err := redislock.New(c, name, &redislock.Options{TTL: 10 * time.Second})
	if err != nil {
		return err
	}
	ctx := context.Background()
	inside, logPath := filepath.Join(dir, "inside"), filepath.Join(dir, "log")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range rounds {
				lock, err := l.Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				f, err := os.OpenFile(inside, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
				if err != nil {
					errs <- fmt.Errorf("two holders at once: %w", err)
					return
				}
				f.Close()
				log, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o666)
				if err == nil {
					_, err = fmt.Fprintln(log, lock.Fence())
					err = errors.Join(err, log.Close())
				}
				err = errors.Join(err, os.Remove(inside), lock.Release(ctx))
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// TestPausedHolderFenced stops a holder (a child process) with SIGSTOP past
// its TTL while this process takes the lock over and writes with its token.
// Resumed, the old holder writes with its stale token: check_fence refuses
// it; its renewal fails and its lock's context ends with ErrLost. The
// scenario is fencetest.PausedHolder's.
func TestPausedHolderFenced(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "a SIGSTOPped holder's writes fenced")
	db := pgtest.DB().NewDatabase(t)
	cmd := lockstest.HelperCmd(roleEnv, "paused", shared.addr, "paused", db)
	fencetest.PausedHolder(t, db, cmd, func(ctx context.Context) (locks.Lock, error) {
		l := newLocker(t, shared, "paused", &redislock.Options{TTL: 10 * time.Second})
		return l.Lock(ctx) // granted once the stopped holder's key expires
	})
}

// childPaused holds the lock with a 1s TTL and runs fencetest.HoldPaused:
// after the parent stopped and resumed it and said "write", it writes with
// its token whatever its lock says, then reports the write, the loss and
// the release.
func childPaused(addr, name, db string) int {
	ctx := context.Background()
	s := &redisServer{addr: addr}
	c := s.client(&noTB{})
	defer c.Close()
	l, err := redislock.New(c, name, &redislock.Options{TTL: time.Second, RenewInterval: 200 * time.Millisecond, SafetyMargin: 200 * time.Millisecond})
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

// TestRestartMidHold kills the Redis under a holder: a TryLock meanwhile
// fails with the network error, not ErrBusy. Restarted empty, the server
// has no key; the holder's renewal finds that and its context ends with
// ErrLost, and a new holder's token is still higher, as the counter
// restarts from the server's clock.
func TestRestartMidHold(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "Redis restarted empty under a holder")
	s := privateRedis(t)
	ctx := t.Context()
	l := newLocker(t, s, "restart", &redislock.Options{TTL: 5 * time.Second, RenewInterval: 100 * time.Millisecond})
	held, err := l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.kill()
	if lock, err := l.TryLock(ctx); err == nil || errors.Is(err, locks.ErrBusy) {
		if err == nil {
			_ = lock.Release(ctx)
		}
		t.Fatalf("TryLock with the server down = %v, want a network error, not ErrBusy", err)
	}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("holder not told of the loss 10s after the restart")
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
		t.Fatalf("token after the restart %d, want > %d", next.Fence(), held.Fence())
	}
}

// TestServerGoneLosesLock kills the server for good: no renewal gets
// through, and the holder counts the lock lost before its TTL runs out.
func TestServerGoneLosesLock(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "Redis killed for good under a holder")
	s := privateRedis(t)
	ctx := t.Context()
	ttl := 2 * time.Second
	l := newLocker(t, s, "gone", &redislock.Options{TTL: ttl, RenewInterval: 100 * time.Millisecond, SafetyMargin: 500 * time.Millisecond})
	held, err := l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	s.kill()
	select {
	case <-held.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("holder not told of the loss")
	}
	if since := time.Since(killed); since >= ttl {
		t.Errorf("loss signalled %s after the kill, want before the TTL %s", since, ttl)
	}
	if cause := context.Cause(held.Context()); !errors.Is(cause, locks.ErrLost) {
		t.Fatalf("cause = %v, want ErrLost", cause)
	}
	_ = held.Release(ctx)
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
	case "contend":
		rounds, _ := strconv.Atoi(args[3])
		if err := contend(args[0], args[1], args[2], rounds); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	case "paused":
		code = childPaused(args[0], args[1], args[2])
	default:
		fmt.Fprintf(os.Stderr, "unknown role %q\n", role)
		code = 2
	}
	os.Exit(code)
}

// noTB is the testing.TB of a child process, which has none: its Cleanup
// is not called, so the caller closes what it gets.
type noTB struct{ testing.TB }

func (*noTB) Cleanup(func()) {}
