package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/pgqueue/pgqueue/internal/pgserver"
)

// The Docker fallback runs the program of pgcontainer/, a module of its
// own, with `go run`: testcontainers-go and the Docker client it needs
// then stay out of pgqueue's go.mod, and so out of the go.sum of every
// program that imports pgqueue (or pgqueuetest).

// containerImage is the image of the container's server.
const containerImage = "postgres:16-alpine"

// pingDocker's errors: Docker does not answer, or the helper program
// cannot run at all (no checkout, a failed build).
var (
	errNoDocker       = errors.New("docker does not answer")
	errNoDockerHelper = errors.New("cannot run internal/pgtest/pgcontainer")
)

// containerDir returns the directory of the pgcontainer module, which
// exists in a checkout of pgqueue: a nested module is not part of the
// module zip, so a build from the module cache has none.
func containerDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("%w: no source file name", errNoDockerHelper)
	}
	dir := filepath.Join(filepath.Dir(file), "pgcontainer")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("%w: the Docker fallback runs from a checkout of pgqueue (%s is missing); set DATABASE_URL to a container's server instead", errNoDockerHelper, dir)
	}
	return dir, nil
}

// containerCommand returns `go run . args...` in the pgcontainer module.
// Go caches the program it builds, so only a first run compiles it.
func containerCommand(ctx context.Context, args ...string) (*exec.Cmd, error) {
	dir, err := containerDir()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", "."}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	return cmd, nil
}

// pingDocker reports whether a Docker daemon answers, asking pgcontainer,
// which bounds its own wait by dockerPingTimeout; ctx bounds the rest (a
// first build of the program).
func pingDocker(ctx context.Context) error {
	cmd, err := containerCommand(ctx, "-ping", "-ping-timeout", dockerPingTimeout.String())
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%w: go run: %v\n%s", errNoDockerHelper, err, strings.TrimSpace(stderr.String()))
	}
	switch answer := strings.TrimSpace(string(out)); {
	case answer == "ok":
		return nil
	case strings.HasPrefix(answer, "no "):
		return fmt.Errorf("%w (%s)", errNoDocker, strings.TrimPrefix(answer, "no "))
	default:
		return fmt.Errorf("%w: it answered %q", errNoDockerHelper, answer)
	}
}

// startContainer runs the server in a container, with the same speed over
// durability settings as a local server. The container lives as long as
// the pgcontainer process, which ends when Close closes its standard
// input, or when this process dies and the pipe closes.
func startContainer(ctx context.Context) (*Server, error) {
	var settings []string
	for _, s := range pgserver.DefaultSettings() {
		if s == "listen_addresses=127.0.0.1" {
			continue // inside the container the port is reached from outside
		}
		settings = append(settings, s)
	}
	for k, v := range sharedSettings {
		settings = append(settings, k+"="+v)
	}
	// Not ctx: the process must outlive Start, until Close.
	cmd, err := containerCommand(context.Background(), append([]string{"-image", containerImage}, settings...)...)
	if err != nil {
		return nil, fmt.Errorf("pgtest: start container: %w", err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("pgtest: start container: %w", err)
	}
	first := &firstLine{line: make(chan string, 1)}
	cmd.Stdout = first
	cmd.Stderr = os.Stderr // testcontainers' progress, and why it failed
	cmd.WaitDelay = cleanupTimeout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("pgtest: start container: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var waitOnce sync.Once
	var waitErr error
	wait := func() error {
		waitOnce.Do(func() {
			_ = stdin.Close() // pgcontainer removes the container and exits
			waitErr = <-exited
		})
		return waitErr
	}

	var dsn string
	select {
	case s := <-first.line:
		dsn = strings.TrimPrefix(s, "dsn ")
		if dsn == s || dsn == "" {
			return nil, fmt.Errorf("pgtest: start container: pgcontainer printed %q, not a connection string (%v)", s, wait())
		}
	case err := <-exited:
		return nil, fmt.Errorf("pgtest: start container: pgcontainer exited (%v) without a connection string", err)
	case <-ctx.Done():
		_ = cmd.Process.Kill() // its program sees its standard input end
		_ = wait()
		return nil, fmt.Errorf("pgtest: start container: %w", ctx.Err())
	}
	stop := func() error {
		if err := wait(); err != nil {
			return fmt.Errorf("pgtest: stop container: %w", err)
		}
		return nil
	}
	return &Server{source: SourceTestcontainers, admin: dsn, stop: stop}, nil
}

// firstLine is the standard output of pgcontainer: it sends the first
// line, without its newline, and drops the rest.
type firstLine struct {
	buf  []byte
	sent bool
	line chan string
}

func (f *firstLine) Write(p []byte) (int, error) {
	if f.sent {
		return len(p), nil
	}
	f.buf = append(f.buf, p...)
	if i := bytes.IndexByte(f.buf, '\n'); i >= 0 {
		f.line <- string(f.buf[:i])
		f.sent, f.buf = true, nil
	}
	return len(p), nil
}
