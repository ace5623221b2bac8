//go:build unix

package integration_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// workerProc is a worker process the tests run (a faultworker or a
// lockworker): its stdout lines are kept, its stderr goes to a log file.
type workerProc struct {
	kind    string // what it is, in messages: "worker", "lockworker"
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once it exited; then waitErr is set
	waitErr error

	mu     sync.Mutex
	stdout []string
}

// startWorkerProc starts bin with args, its stderr to logPath, and kills
// it when the test ends, however it ends (a cleanup registered now runs
// before those registered earlier: the database pool, the server).
func startWorkerProc(t *testing.T, kind, name, bin, logPath string, args ...string) *workerProc {
	t.Helper()
	p := &workerProc{kind: kind, name: name, logPath: logPath, exited: make(chan struct{})}
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = logFile
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.read(stdout)
	t.Cleanup(p.kill)
	return p
}

// read keeps the stdout lines, then reaps the process once it closed its
// stdout.
func (p *workerProc) read(r io.Reader) {
	s := bufio.NewScanner(r)
	for s.Scan() {
		p.mu.Lock()
		p.stdout = append(p.stdout, s.Text())
		p.mu.Unlock()
	}
	p.waitErr = p.cmd.Wait() // once stdout is drained, as exec.Cmd requires
	close(p.exited)
}

// label names the process in messages.
func (p *workerProc) label() string { return p.kind + " " + p.name }

// sawLine reports whether the process printed a line that is line or, with
// prefix, starts with it.
func (p *workerProc) sawLine(line string, prefix bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.stdout {
		if l == line || prefix && strings.HasPrefix(l, line) {
			return true
		}
	}
	return false
}

// waitLine waits until the process printed line (or, with prefix, a line
// starting with it).
func (p *workerProc) waitLine(t *testing.T, line string, timeout time.Duration, prefix bool) {
	t.Helper()
	deadline := time.After(timeout)
	for !p.sawLine(line, prefix) {
		select {
		case <-p.exited:
			if p.sawLine(line, prefix) {
				return
			}
			t.Fatalf("%s exited (%v) before printing %q\n%s", p.label(), p.waitErr, line, p.logTail())
		case <-deadline:
			t.Fatalf("%s did not print %q within %s\n%s", p.label(), line, timeout, p.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitReady waits until the process printed "ready".
func (p *workerProc) waitReady(t *testing.T) {
	t.Helper()
	p.waitLine(t, "ready", 30*time.Second, false)
}

func (p *workerProc) signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// kill ends the process at once, stopped or not, and reaps it.
func (p *workerProc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// stop asks the process to stop gracefully (SIGCONT, then SIGTERM) and
// waits up to timeout for it, then kills it.
func (p *workerProc) stop(timeout time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.signal(syscall.SIGCONT)
	_ = p.signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if p.waitErr != nil {
			return fmt.Errorf("%s: %w", p.label(), p.waitErr)
		}
		return nil
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("%s did not stop within %s", p.label(), timeout)
	}
}

// logTail returns the end of the process's log.
func (p *workerProc) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log of %s: %v)\n", p.label(), err)
	}
	const limit = 3000
	if len(b) > limit {
		b = b[len(b)-limit:]
	}
	return fmt.Sprintf("--- %s log tail ---\n%s\n", p.label(), b)
}

// binaries are the commands built for this test binary, by package path.
var binaries sync.Map // string -> *builtBinary

type builtBinary struct {
	once sync.Once
	path string
	err  error
}

// buildBinary returns the command pkg (an import path) built for this test
// binary, building it the first time.
func buildBinary(t *testing.T, pkg string) string {
	t.Helper()
	v, _ := binaries.LoadOrStore(pkg, new(builtBinary))
	b := v.(*builtBinary)
	b.once.Do(func() { b.path, b.err = goBuild(pkg) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// binDirPrefix names the directory goBuild builds into: the prefix and the
// test binary's process ID.
const binDirPrefix = "pgqueue-integration-bin-"

// goBuild builds pkg into a temporary directory named for this process.
// Nothing removes it when the process ends (the package's TestMain is in
// the internal test package), so each build first removes those of
// processes that are gone.
func goBuild(pkg string) (string, error) {
	name := path.Base(pkg)
	goBin, err := exec.LookPath("go")
	if err != nil {
		if root := os.Getenv("GOROOT"); root != "" {
			goBin, err = filepath.Join(root, "bin", "go"), nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("build %s: no go command: %w", name, err)
	}
	stale, _ := filepath.Glob(filepath.Join(os.TempDir(), binDirPrefix+"*"))
	for _, dir := range stale {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), binDirPrefix))
		if err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.RemoveAll(dir)
		}
	}
	dir := filepath.Join(os.TempDir(), binDirPrefix+strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command(goBin, "build", "-o", bin, pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", name, err, out)
	}
	return bin, nil
}

// stopProcs stops procs together, each gracefully within timeout, and
// returns what each stop returned.
func stopProcs(procs []*workerProc, timeout time.Duration) []error {
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.stop(timeout) })
	}
	wg.Wait()
	return errs
}

// pollUntil polls cond every 50ms, each call with 5s to answer, until it
// holds, tolerating errors; after timeout it fails the test with the last
// error and what dump says.
func pollUntil(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, error), dump func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		ok, err := cond(ctx)
		cancel()
		if err == nil && ok {
			return
		}
		if err != nil {
			lastErr = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s (last error: %v)\n%s", timeout, what, lastErr, dump())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
