package filelock

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestLock(t *testing.T) {
	t.Parallel()

	t.Run("CounterAcrossProcesses", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a counter under the lock across 4 processes")
		const procs, iters = 4, 200
		dir := t.TempDir()
		lockPath := filepath.Join(dir, "counter.lock")
		counterPath := filepath.Join(dir, "counter")
		insidePath := filepath.Join(dir, "inside")
		if err := os.WriteFile(counterPath, []byte("0"), 0o666); err != nil {
			t.Fatal(err)
		}

		errs := make(chan error, procs)
		for range procs {
			cmd := helperCmd(os.Args[0], "counter", lockPath, counterPath, insidePath, strconv.Itoa(iters))
			go func() {
				out, err := cmd.CombinedOutput()
				if err != nil {
					err = errors.New(err.Error() + ": " + string(out))
				}
				errs <- err
			}()
		}
		for range procs {
			if err := <-errs; err != nil {
				t.Errorf("child: %v", err) // exit status 3 means overlap
			}
		}
		b, err := os.ReadFile(counterPath)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(b), strconv.Itoa(procs*iters); got != want {
			t.Errorf("counter = %s, want %s", got, want)
		}
	})

	t.Run("HolderKilledReleasesLock", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "killed.lock")
		holder := startHolder(t, path, "ex")

		l := New(path)
		if err := l.TryLock(); !errors.Is(err, ErrBusy) {
			t.Fatalf("TryLock while held = %v, want ErrBusy", err)
		}
		if err := holder.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		holder.Wait()
		if err := l.TryLock(); err != nil {
			t.Fatalf("TryLock after holder died = %v, want nil", err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("TwoValuesInOneProcessExclude", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "same.lock")
		a, b := New(path), New(path)
		if err := a.TryLock(); err != nil {
			t.Fatal(err)
		}
		if err := b.TryLock(); !errors.Is(err, ErrBusy) {
			t.Fatalf("second value TryLock = %v, want ErrBusy", err)
		}
		if err := b.TryRLock(); !errors.Is(err, ErrBusy) {
			t.Fatalf("second value TryRLock = %v, want ErrBusy", err)
		}
		if err := a.Unlock(); err != nil {
			t.Fatal(err)
		}
		if err := b.TryLock(); err != nil {
			t.Fatalf("TryLock after Unlock = %v", err)
		}
		if err := b.Unlock(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("SharedLocksCoexist", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "shared.lock")
		startHolder(t, path, "sh")

		a, b, c := New(path), New(path), New(path)
		if err := a.TryRLock(); err != nil {
			t.Fatalf("TryRLock beside a shared holder = %v", err)
		}
		if err := b.RLock(t.Context()); err != nil {
			t.Fatalf("RLock beside two shared holders = %v", err)
		}
		if err := c.TryLock(); !errors.Is(err, ErrBusy) {
			t.Fatalf("TryLock beside shared holders = %v, want ErrBusy", err)
		}
		for _, l := range []*Lock{a, b} {
			if err := l.Unlock(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.TryLock(); !errors.Is(err, ErrBusy) {
			t.Fatalf("TryLock beside the child's shared lock = %v, want ErrBusy", err)
		}
	})

	t.Run("ExclusiveExcludesShared", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "excl.lock")
		startHolder(t, path, "ex")
		l := New(path)
		if err := l.TryRLock(); !errors.Is(err, ErrBusy) {
			t.Fatalf("TryRLock beside an exclusive holder = %v, want ErrBusy", err)
		}
		if err := l.TryLock(); !errors.Is(err, ErrBusy) {
			t.Fatalf("TryLock beside an exclusive holder = %v, want ErrBusy", err)
		}
	})

	t.Run("DeadlineEndsWait", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "deadline.lock")
		startHolder(t, path, "ex")

		l := New(path)
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := l.Lock(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock = %v, want DeadlineExceeded", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Lock returned %v after start, want about 100ms", d)
		}
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Path != path {
			t.Errorf("error %v does not name the path", err)
		}
		// The Lock stays usable after a cancelled wait.
		if err := l.TryLock(); !errors.Is(err, ErrBusy) {
			t.Fatalf("TryLock after cancelled wait = %v, want ErrBusy", err)
		}
	})

	t.Run("CancelEndsWait", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "cancel.lock")
		holder := New(path)
		if err := holder.TryLock(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		timer := time.AfterFunc(50*time.Millisecond, cancel)
		defer timer.Stop()
		start := time.Now()
		if err := New(path).RLock(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("RLock = %v, want Canceled", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("RLock returned %v after start, want about 50ms", d)
		}
	})

	t.Run("DoneContextTakesNoLock", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "done.lock")
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := New(path).Lock(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock with done ctx = %v, want Canceled", err)
		}
	})

	t.Run("WaitSucceedsWhenReleased", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "handover.lock")
		holder := New(path)
		if err := holder.TryLock(); err != nil {
			t.Fatal(err)
		}
		timer := time.AfterFunc(30*time.Millisecond, func() { holder.Unlock() })
		defer timer.Stop()
		l := New(path)
		if err := l.Lock(t.Context()); err != nil {
			t.Fatalf("Lock = %v", err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ErrorIfAlreadyHeld", func(t *testing.T) {
		t.Parallel()
		l := New(tempPath(t, "held.lock"))
		if err := l.TryLock(); err != nil {
			t.Fatal(err)
		}
		for name, err := range map[string]error{
			"Lock":     l.Lock(t.Context()),
			"TryLock":  l.TryLock(),
			"RLock":    l.RLock(t.Context()),
			"TryRLock": l.TryRLock(),
		} {
			if !errors.Is(err, ErrAlreadyHeld) || errors.Is(err, ErrBusy) {
				t.Errorf("%s on a held Lock = %v, want ErrAlreadyHeld", name, err)
			}
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ErrorIfNotLocked", func(t *testing.T) {
		t.Parallel()
		l := New(tempPath(t, "unheld.lock"))
		if err := l.Unlock(); !errors.Is(err, ErrNotLocked) {
			t.Fatalf("Unlock of a new Lock = %v, want ErrNotLocked", err)
		}
		if err := l.TryRLock(); err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(); !errors.Is(err, ErrNotLocked) {
			t.Fatalf("second Unlock = %v, want ErrNotLocked", err)
		}
	})

	t.Run("GoroutineMisuseDuringWait", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "misuse.lock")
		holder := New(path)
		if err := holder.TryLock(); err != nil {
			t.Fatal(err)
		}
		l := New(path)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() { l.Lock(ctx) })
		time.Sleep(20 * time.Millisecond) // let the wait begin
		if err := l.Unlock(); !errors.Is(err, ErrNotLocked) {
			t.Errorf("Unlock during wait = %v, want ErrNotLocked", err)
		}
		if err := l.TryLock(); !errors.Is(err, ErrAlreadyHeld) {
			t.Errorf("TryLock during wait = %v, want ErrAlreadyHeld", err)
		}
		cancel()
		wg.Wait()
	})

	t.Run("LockFileKeptAfterUnlock", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "kept.lock")
		l := New(path)
		if err := l.TryLock(); err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("lock file after Unlock: %v", err)
		}
	})

	t.Run("MissingDirectoryIsNotBusy", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "missing", "x.lock")
		for name, err := range map[string]error{
			"TryLock":  New(path).TryLock(),
			"TryRLock": New(path).TryRLock(),
			"Lock":     New(path).Lock(t.Context()), // fails at once, no wait
		} {
			if errors.Is(err, ErrBusy) || !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s = %v, want fs.ErrNotExist and not ErrBusy", name, err)
			}
			var pe *fs.PathError
			if !errors.As(err, &pe) || pe.Path != path {
				t.Errorf("%s error %v does not name the path", name, err)
			}
		}
	})
}
