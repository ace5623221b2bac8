package filelock

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Child processes are this test binary run again with -test.run selecting
// TestHelperProcess and roleEnv naming what to do; arguments follow "--".
const roleEnv = "FILELOCK_TEST_ROLE"

// TestHelperProcess is not a test: it is the body of the child processes the
// other tests start, and returns at once when run as a test.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(roleEnv)
	if role == "" {
		return
	}
	args := flag.Args()
	code := 0
	switch role {
	case "counter":
		code = childCounter(args[0], args[1], args[2], args[3])
	case "hold":
		code = childHold(args[0], args[1])
	case "trylock":
		code = childTryLock(args[0], args[1])
	case "marker-race":
		code = childMarkerRace(args[0], args[1], args[2])
	case "marker-hold":
		code = childMarkerHold(args[0], args[1])
	case "fenced":
		code = childFenced(args[0], args[1], args[2])
	default:
		fmt.Fprintf(os.Stderr, "unknown role %q\n", role)
		code = 2
	}
	os.Exit(code)
}

// childCounter increments the counter file n times under the lock, and exits
// with 3 if it ever finds another process inside the critical section.
func childCounter(lockPath, counterPath, insidePath, n string) int {
	iters, err := strconv.Atoi(n)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	l := New(lockPath)
	for range iters {
		if err := l.Lock(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		inside, err := os.OpenFile(insidePath, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
		if errors.Is(err, fs.ErrExist) {
			fmt.Fprintln(os.Stderr, "overlap: inside marker already exists")
			return 3
		} else if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		inside.Close()
		b, err := os.ReadFile(counterPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		c, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := os.WriteFile(counterPath, []byte(strconv.Itoa(c+1)), 0o666); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := os.Remove(insidePath); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := l.Unlock(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// childHold takes the lock ("ex" or "sh"), prints "ready" and holds it until
// killed or until stdin closes (the parent went away).
func childHold(lockPath, mode string) int {
	l := New(lockPath)
	var err error
	if mode == "ex" {
		err = l.Lock(context.Background())
	} else {
		err = l.RLock(context.Background())
	}
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// childTryLock tries the lock once and prints how the result classifies.
func childTryLock(lockPath, mode string) int {
	l := New(lockPath)
	var err error
	if mode == "ex" {
		err = l.TryLock()
	} else {
		err = l.TryRLock()
	}
	fmt.Println(classify(err))
	return 0
}

// classify renders an error as the facts the tests check about it.
func classify(err error) string {
	if err == nil {
		return "ok"
	}
	return fmt.Sprintf("busy=%t permission=%t notexist=%t: %v",
		errors.Is(err, ErrBusy), errors.Is(err, fs.ErrPermission), errors.Is(err, fs.ErrNotExist), err)
}

// childMarkerRace announces itself by creating readyPath, waits for goPath to
// appear, tries to take the marker, and prints "won <owner>" or "busy".
func childMarkerRace(markerPath, readyPath, goPath string) int {
	if err := os.WriteFile(readyPath, nil, 0o666); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(goPath); err == nil {
			break
		}
		if time.Now().After(deadline) {
			fmt.Println("error: no go signal")
			return 1
		}
		time.Sleep(100 * time.Microsecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := NewMarker(markerPath, time.Minute)
	switch err := m.TryAcquire(ctx); {
	case err == nil:
		fmt.Println("won", m.Owner())
	case errors.Is(err, ErrBusy):
		fmt.Println("busy")
	default:
		fmt.Println("error:", err)
	}
	return 0
}

// childMarkerHold acquires the marker with the given lease, prints "ready"
// and waits to be killed.
func childMarkerHold(markerPath, lease string) int {
	d, err := time.ParseDuration(lease)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	m := NewMarker(markerPath, d)
	if err := m.TryAcquire(context.Background()); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready")
	time.Sleep(time.Minute)
	return 0
}

// helperCmd returns a command that runs role in a child process of exe.
func helperCmd(exe, role string, args ...string) *exec.Cmd {
	cmd := exec.Command(exe, append([]string{"-test.run=^TestHelperProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), roleEnv+"="+role,
		// Under -race a child would otherwise sleep 1s on exit.
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	return cmd
}

// startHolder starts a child that holds the lock at path in mode ("ex" or
// "sh") and returns once it holds it. The child is killed at cleanup.
func startHolder(t *testing.T, path, mode string) *exec.Cmd {
	t.Helper()
	cmd := helperCmd(os.Args[0], "hold", path, mode)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("holder did not get ready: %q, %v", line, err)
	}
	return cmd
}

// tempPath returns a path named name in a fresh test directory.
func tempPath(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(t.TempDir(), name)
}
