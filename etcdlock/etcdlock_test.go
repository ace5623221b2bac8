package etcdlock_test

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/pgqueue/pgqueue/etcdlock"
	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/locks"
	"github.com/pgqueue/pgqueue/locks/lockstest"
	"github.com/pgqueue/pgqueue/pglock"
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
// with ErrLost.
func TestPausedHolderFenced(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := pgtest.DB().NewDatabase(t)
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	cmd := helperCmd("paused", shared.endpoint, "paused", db)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	r := bufio.NewReader(stdout)
	oldFence, err := strconv.ParseInt(strings.TrimPrefix(readLine(t, r), "fence "), 10, 64)
	if err != nil {
		t.Fatal(err)
	}

	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	l := newLocker(t, shared.client(t), "paused", 10*time.Second)
	start := time.Now()
	lock, err := l.Lock(ctx) // granted once the stopped holder's lease expires
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release(ctx)
	t.Logf("took over after %s", time.Since(start).Round(time.Millisecond))
	if lock.Fence() <= oldFence {
		t.Fatalf("takeover fence %d, want > %d", lock.Fence(), oldFence)
	}
	if err := fencedWrite(ctx, pool, lock.Fence()); err != nil {
		t.Fatal(err)
	}

	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, "write")
	if got := readLine(t, r); got != "write: stale" {
		t.Errorf("stale holder's write: %s", got)
	}
	if got := readLine(t, r); got != "lost: true" {
		t.Errorf("stale holder's lock: %s", got)
	}
	if got := readLine(t, r); got != "release: lost" {
		t.Errorf("stale holder's release: %s", got)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	var writer int64
	if err := pool.QueryRow(ctx, "SELECT max(fence) FROM report").Scan(&writer); err != nil {
		t.Fatal(err)
	}
	if writer != lock.Fence() {
		t.Fatalf("report written by fence %d, want only %d", writer, lock.Fence())
	}
}

// fencedWrite inserts a row into report, fenced with token by check_fence.
func fencedWrite(ctx context.Context, pool *pgxpool.Pool, token int64) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS report (fence bigint)"); err != nil {
		return err
	}
	if err := pglock.CheckFenceTx(ctx, tx, "", "report", token); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO report VALUES ($1)", token); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// childPaused holds the lock on a 2s session (etcd's shortest lease) and
// prints its token; after the parent stopped and resumed it and said
// "write", it writes with that token whatever its lock says, then reports
// the write, the loss and the release.
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
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pool.Close()
	fmt.Printf("fence %d\n", lock.Fence())
	in := bufio.NewScanner(os.Stdin)
	in.Scan() // "write", after SIGCONT
	err = fencedWrite(ctx, pool, lock.Fence())
	switch {
	case errors.Is(err, pglock.ErrStaleFence):
		fmt.Println("write: stale")
	default:
		fmt.Printf("write: %v\n", err)
	}
	select {
	case <-lock.Context().Done():
		fmt.Printf("lost: %t\n", errors.Is(context.Cause(lock.Context()), locks.ErrLost))
	case <-time.After(10 * time.Second):
		fmt.Println("lost: not signalled")
	}
	if err := lock.Release(ctx); errors.Is(err, locks.ErrLost) {
		fmt.Println("release: lost")
	} else {
		fmt.Printf("release: %v\n", err)
	}
	return 0
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

func helperCmd(role string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestHelperProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), roleEnv+"="+role,
		// Under -race a child would otherwise sleep 1s on exit.
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	return cmd
}

// readLine reads one line from r, failing the test after 30s.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	type res struct {
		s   string
		err error
	}
	c := make(chan res, 1)
	go func() {
		s, err := r.ReadString('\n')
		c <- res{s, err}
	}()
	select {
	case r := <-c:
		if r.err != nil {
			t.Fatalf("read from child: %v (got %q)", r.err, r.s)
		}
		return r.s[:len(r.s)-1]
	case <-time.After(30 * time.Second):
		t.Fatal("no line from child in 30s")
		return ""
	}
}
