package filelock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue/locks"
	"github.com/pgqueue/pgqueue/locks/lockstest"
)

func TestFencedContract(t *testing.T) {
	t.Parallel()
	lockstest.Run(t, func(t *testing.T) locks.Locker {
		return NewFenced(tempPath(t, "fenced.lock"), nil)
	})
}

// TestFencedAcrossProcesses has processes take the lock in turns and append
// their tokens to a log under it: the log must be strictly increasing, so
// the tokens follow the order of the acquisitions whichever process made
// them.
func TestFencedAcrossProcesses(t *testing.T) {
	t.Parallel()
	const procs, iters = 3, 50
	dir := t.TempDir()
	lockPath, logPath := filepath.Join(dir, "fenced.lock"), filepath.Join(dir, "log")
	errs := make(chan error, procs)
	for range procs {
		cmd := helperCmd(os.Args[0], "fenced", lockPath, logPath, strconv.Itoa(iters))
		go func() {
			out, err := cmd.CombinedOutput()
			if err != nil {
				err = fmt.Errorf("%w: %s", err, out)
			}
			errs <- err
		}()
	}
	for range procs {
		if err := <-errs; err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	if len(lines) != procs*iters {
		t.Fatalf("%d acquisitions logged, want %d", len(lines), procs*iters)
	}
	var last int64
	for i, line := range lines {
		n, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && n != last+1 {
			t.Fatalf("token %d after %d, want %d", n, last, last+1)
		}
		last = n
	}
}

// childFenced takes the fenced lock n times and appends each token to the
// log while holding it.
func childFenced(lockPath, logPath, n string) int {
	iters, err := strconv.Atoi(n)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	f := NewFenced(lockPath, nil)
	for range iters {
		lock, err := f.Lock(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		log, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o666)
		if err == nil {
			_, err = fmt.Fprintln(log, lock.Fence())
			err = errors.Join(err, log.Close())
		}
		if err := errors.Join(err, lock.Release(ctx)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

func TestFencedCounter(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	t.Run("NewFileStartsAtTheClock", func(t *testing.T) {
		t.Parallel()
		before := time.Now().UnixMicro()
		lock, err := NewFenced(tempPath(t, "new.lock"), nil).TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Release(ctx)
		if lock.Fence() <= before {
			t.Fatalf("first token %d, want > %d (the clock in microseconds)", lock.Fence(), before)
		}
	})

	t.Run("KeptInTheFile", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "kept.lock")
		if err := os.WriteFile(path, []byte("41\n"), 0o666); err != nil {
			t.Fatal(err)
		}
		lock, err := NewFenced(path, nil).TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if lock.Fence() != 42 {
			t.Fatalf("token %d, want 42", lock.Fence())
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); string(b) != "42\n" {
			t.Fatalf("file holds %q, want %q", b, "42\n")
		}
	})

	t.Run("GarbageIsNotBusy", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "garbage.lock")
		if err := os.WriteFile(path, []byte("not a number"), 0o666); err != nil {
			t.Fatal(err)
		}
		f := NewFenced(path, nil)
		_, err := f.TryLock(ctx)
		if !errors.Is(err, ErrBadFence) || errors.Is(err, ErrBusy) {
			t.Fatalf("TryLock = %v, want ErrBadFence and not ErrBusy", err)
		}
		// The failed attempt left the file unlocked.
		if err := New(path).TryLock(); err != nil {
			t.Fatalf("plain TryLock after: %v", err)
		}
	})

	t.Run("MissingDirectoryIsNotBusy", func(t *testing.T) {
		t.Parallel()
		_, err := NewFenced(filepath.Join(t.TempDir(), "no", "such.lock"), nil).TryLock(ctx)
		if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrBusy) {
			t.Fatalf("TryLock = %v, want fs.ErrNotExist and not ErrBusy", err)
		}
	})

	t.Run("PlainLockExcludes", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "plain.lock")
		plain := New(path)
		if err := plain.TryLock(); err != nil {
			t.Fatal(err)
		}
		if _, err := NewFenced(path, nil).TryLock(ctx); !errors.Is(err, ErrBusy) {
			t.Fatalf("TryLock beside a plain holder = %v, want ErrBusy", err)
		}
		if err := plain.Unlock(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFencedLostWhenFileDeleted deletes the lock file under a holder: a
// second holder locks the new file at the path, the first one's context
// ends with ErrLost, and the new file's counter is still ahead of the old.
func TestFencedLostWhenFileDeleted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := tempPath(t, "deleted.lock")
	f := NewFenced(path, &FencedOpts{CheckInterval: 10 * time.Millisecond})
	old, err := f.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	newer, err := f.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock on the new file: %v", err)
	}
	defer newer.Release(ctx)
	select {
	case <-old.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("context of the holder whose file was deleted not done")
	}
	if cause := context.Cause(old.Context()); !errors.Is(cause, locks.ErrLost) {
		t.Fatalf("cause = %v, want ErrLost", cause)
	}
	if err := old.Release(ctx); !errors.Is(err, locks.ErrLost) {
		t.Fatalf("Release = %v, want ErrLost", err)
	}
	if newer.Fence() <= old.Fence() {
		t.Fatalf("new file's token %d, want > %d", newer.Fence(), old.Fence())
	}
}
