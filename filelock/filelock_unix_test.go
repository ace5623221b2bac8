//go:build unix

package filelock

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestPermissionIsNotBusy checks that a lock the caller may not open fails
// with the permission error, not ErrBusy. Root bypasses file permissions, so
// as root the attempts run in a child process as user nobody.
func TestPermissionIsNotBusy(t *testing.T) {
	t.Parallel()
	try := tryAsUnprivileged(t)

	// Directories that nobody can traverse but only root can write.
	base := worldDir(t)
	roDir := filepath.Join(base, "ro")
	if err := os.Mkdir(roDir, 0o755); err != nil {
		t.Fatal(err)
	}
	roFile := filepath.Join(base, "ro-file.lock")
	if err := os.WriteFile(roFile, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(roFile, 0o444); err != nil { // umask may have narrowed it
		t.Fatal(err)
	}
	rwDir := filepath.Join(base, "rw")
	if err := os.Mkdir(rwDir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(rwDir, 0o777); err != nil {
		t.Fatal(err)
	}

	// The control, which also skips the test if no child can run as nobody:
	// the same child can lock where it may write.
	if got := try(t, filepath.Join(rwDir, "ok.lock"), "ex"); got != "ok" {
		t.Fatalf("lock in writable directory: %s", got)
	}

	t.Run("BusyIsBusy", func(t *testing.T) {
		path := filepath.Join(rwDir, "busy.lock")
		if err := os.WriteFile(path, nil, 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o666); err != nil {
			t.Fatal(err)
		}
		startHolder(t, path, "ex")
		if got := try(t, path, "ex"); !strings.HasPrefix(got, "busy=true permission=false") {
			t.Fatalf("lock held by another process: %s", got)
		}
	})
	for _, mode := range []string{"ex", "sh"} {
		t.Run("UnwritableDirectory/"+mode, func(t *testing.T) {
			got := try(t, filepath.Join(roDir, "x.lock"), mode)
			if !strings.HasPrefix(got, "busy=false permission=true") {
				t.Fatalf("lock in unwritable directory: %s", got)
			}
		})
		t.Run("ReadOnlyFile/"+mode, func(t *testing.T) {
			got := try(t, roFile, mode)
			if !strings.HasPrefix(got, "busy=false permission=true") {
				t.Fatalf("lock on a 0444 file: %s", got)
			}
		})
	}
}

// tryAsUnprivileged returns a function that tries the lock at path once, in
// mode "ex" or "sh", without root's permission bypass, and reports the result
// as classify does.
func tryAsUnprivileged(t *testing.T) func(t *testing.T, path, mode string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		return func(_ *testing.T, path, mode string) string {
			l := New(path)
			var err error
			if mode == "ex" {
				err = l.TryLock()
			} else {
				err = l.TryRLock()
			}
			if err == nil {
				l.Unlock()
			}
			return classify(err)
		}
	}

	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("running as root and there is no user nobody to drop to: %v", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		t.Skipf("user nobody has odd ids: %v", err)
	}

	// The test binary sits in a directory only root may enter; nobody runs
	// a copy.
	dir := worldDir(t)
	exe := filepath.Join(dir, "filelock.test")
	if err := copyFile(exe, os.Args[0]); err != nil {
		t.Fatal(err)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}

	return func(t *testing.T, path, mode string) string {
		t.Helper()
		cmd := helperCmd(exe, "trylock", path, mode)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.Output()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			t.Fatalf("child as nobody failed: %v: %s", err, ee.Stderr)
		case errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL):
			t.Skipf("cannot start a process as nobody here (no CAP_SETUID or unmapped uid): %v", err)
		case err != nil:
			t.Fatalf("start child as nobody: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
}

// worldDir returns a new directory under os.TempDir that every user may
// enter and read but only its owner may write, removed at cleanup. It skips
// the test when the path to it is not traversable by others.
func worldDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "filelock-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not traversable by other users; set TMPDIR to a directory that is", p)
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	return dir
}

// copyFile copies the executable src to dst. The copy is written under
// syscall.ForkLock: a process another parallel test forks in that window
// (os/exec holds the lock's read side while it forks) would inherit the
// write descriptor until its exec, and running dst then failed with "text
// file busy".
func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	syscall.ForkLock.Lock()
	defer syscall.ForkLock.Unlock()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, 0o755)
}

// TestFailedAcquireClosesFile checks that failed attempts leave no open
// descriptors behind. It counts this process's descriptors, so it does not
// run in parallel with other tests.
func TestFailedAcquireClosesFile(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd to count descriptors")
	}
	path := tempPath(t, "fd.lock")
	holder := New(path)
	if err := holder.TryLock(); err != nil {
		t.Fatal(err)
	}
	defer holder.Unlock()

	before := countFDs(t)
	const attempts = 50
	for range attempts {
		if err := New(path).TryLock(); !errors.Is(err, ErrBusy) {
			t.Fatalf("TryLock = %v, want ErrBusy", err)
		}
	}
	if after := countFDs(t); after > before+2 {
		t.Fatalf("open descriptors grew from %d to %d over %d failed attempts", before, after, attempts)
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}
