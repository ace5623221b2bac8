// Package fencetest checks that a lock backend's fence tokens protect a
// store: a holder paused past its lock's expiry (SIGSTOP), whose lock
// another process took over meanwhile, must find its write refused by
// PostgreSQL's check_fence (pglock.CheckFenceTx) once resumed, and its
// lock reported lost. redislock and etcdlock run the same scenario
// through PausedHolder (the parent) and HoldPaused (the child); pglock's
// own tests use FencedWrite. It may import locks, pglock and pgx; only
// tests import it.
package fencetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/locks"
	"github.com/pgqueue/pgqueue/pglock"
)

// PausedHolder checks that a holder paused past its lock's expiry is
// fenced. cmd is a child process that acquires the lock with a short TTL
// and then runs HoldPaused on db, a PostgreSQL connection string; it must
// not have been started. PausedHolder starts it, stops it with SIGSTOP and,
// while it is stopped, takes the lock over with takeOver (which waits until
// the stopped holder's lock expires) and writes to the report table with
// the new token. Resumed with SIGCONT and told to write, the old holder
// must report its write refused by check_fence, its lock's context ended
// with ErrLost and its Release saying ErrLost; report must hold only the
// new holder's row.
func PausedHolder(t *testing.T, db string, cmd *exec.Cmd, takeOver func(ctx context.Context) (locks.Lock, error)) {
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

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
	start := time.Now()
	lock, err := takeOver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release(ctx)
	t.Logf("took over after %s", time.Since(start).Round(time.Millisecond))
	if lock.Fence() <= oldFence {
		t.Fatalf("takeover fence %d, want > %d", lock.Fence(), oldFence)
	}
	if err := FencedWrite(ctx, pool, lock.Fence()); err != nil {
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

// HoldPaused is the child's side of PausedHolder, run once it holds lock:
// it prints the lock's token; after the parent stopped and resumed it and
// said "write" on stdin, it writes to db with that token whatever its lock
// says, then reports the write, the loss and the release on stdout. It
// returns the child's exit code.
func HoldPaused(ctx context.Context, lock locks.Lock, db string) int {
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pool.Close()
	fmt.Printf("fence %d\n", lock.Fence())
	in := bufio.NewScanner(os.Stdin)
	in.Scan() // "write", after SIGCONT
	err = FencedWrite(ctx, pool, lock.Fence())
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

// FencedWrite inserts a row into report, fenced with token by check_fence
// (pglock.CheckFenceTx): a token lower than one already recorded for
// report fails with pglock.ErrStaleFence and writes nothing. Both sides of
// PausedHolder write with it, and so may a backend's own tests.
func FencedWrite(ctx context.Context, pool *pgxpool.Pool, token int64) error {
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
