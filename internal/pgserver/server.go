package pgserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// readyTimeout bounds the wait for a freshly started postmaster to accept
	// connections; crash recovery after StopImmediate is included.
	readyTimeout = 30 * time.Second
	// stopTimeout is how long Close waits for a fast shutdown before SIGKILL.
	stopTimeout = 10 * time.Second
	// portAttempts is how often Start picks a new port when another
	// process took the one it picked before postgres could bind it.
	portAttempts = 5

	dirPrefix = "pgserver-"
	ownerFile = "owner.pid"
	logName   = "postgres.log"
)

// defaultSettings trade durability against a crash of the machine for
// speed: a test server's data is thrown away anyway. Committed data still
// survives a crash of postgres alone (StopImmediate), because the kernel
// keeps what postgres wrote.
var defaultSettings = []string{
	"listen_addresses=127.0.0.1",
	"fsync=off",
	"full_page_writes=off",
	"max_connections=300",
	"shared_buffers=128MB",
	// The data directory may be in memory (Options.InMemory): checkpoints
	// keep its WAL within this.
	"max_wal_size=256MB",
}

// DefaultSettings returns the settings every Server starts with, as
// name=value, for servers started another way (a container) to match.
func DefaultSettings() []string { return slices.Clone(defaultSettings) }

// errPortTaken marks a start that failed because another process bound the
// port between our probe and postgres's bind.
var errPortTaken = errors.New("port taken by another process")

// Options configures Start.
type Options struct {
	// Settings are extra server settings, passed as -c name=value after the
	// defaults (listen_addresses=127.0.0.1, fsync=off, full_page_writes=off,
	// max_connections=300, shared_buffers=128MB, max_wal_size=256MB), so
	// they override them.
	// synchronous_commit stays on, so that a commit survives StopImmediate.
	// Nil means none.
	Settings map[string]string
	// Binaries are the programs to run; nil means FindBinaries.
	Binaries *Binaries
	// InMemory puts the server's directory, its data included, in memory
	// (/dev/shm, on Linux, with 2 GiB free) when the machine has it, else
	// in the temporary directory as without it. For a server that creates
	// and drops many databases: on ext4 their hundreds of files each cost
	// more CPU in the kernel than the tests that use them. It survives
	// StopImmediate like a server on disk.
	InMemory bool
}

// Server is a private throwaway server run from local PostgreSQL binaries
// in a temporary directory. Fault tests may stop and restart it; it keeps
// its port and data directory until Close.
type Server struct {
	bin     Binaries
	user    *osUser // who runs the server; nil means this process's user
	dir     string  // temporary directory: data, socket and log; removed by Close
	dataDir string
	args    []string // postgres arguments except the port
	port    int

	mu     sync.Mutex // serialises Start, StopImmediate and Close
	proc   *postmaster
	closed bool
}

// Start initialises and starts a private server from local PostgreSQL
// binaries, whatever DATABASE_URL says, and waits until it accepts
// connections. It fails if no binaries are found. The caller must Close it.
func Start(ctx context.Context, opts Options) (*Server, error) {
	var bin Binaries
	if opts.Binaries != nil {
		bin = *opts.Binaries
	} else {
		var err error
		if bin, err = FindBinaries(); err != nil {
			return nil, fmt.Errorf("pgserver: start local server: %w", err)
		}
	}
	l, err := startLocal(ctx, bin, opts.Settings, opts.InMemory)
	if err != nil {
		return nil, fmt.Errorf("pgserver: start local server: %w", err)
	}
	return l, nil
}

func startLocal(ctx context.Context, bin Binaries, settings map[string]string, inMemory bool) (*Server, error) {
	user, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := makeServerDir(user, inMemory)
	if err != nil {
		return nil, err
	}
	l := &Server{
		bin:     bin,
		user:    user,
		dir:     dir,
		dataDir: filepath.Join(dir, "data"),
	}
	l.args = []string{"-D", l.dataDir, "-k", dir}
	for _, s := range defaultSettings {
		l.args = append(l.args, "-c", s)
	}
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		l.args = append(l.args, "-c", k+"="+settings[k])
	}

	if err := l.initdb(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		if l.port, err = freePort(); err != nil {
			break
		}
		if l.proc, err = l.launch(ctx); err == nil {
			return l, nil
		}
		if attempt == portAttempts || !errors.Is(err, errPortTaken) {
			break
		}
	}
	_ = os.RemoveAll(dir)
	return nil, err
}

// ConnString returns a URL connecting as the superuser postgres over TCP to
// database dbname on this server.
func (l *Server) ConnString(dbname string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(l.port)),
		Path:     "/" + dbname,
		RawPath:  "/" + url.PathEscape(dbname),
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port returns the TCP port the server listens on (on 127.0.0.1). It stays
// the same across StopImmediate and Start.
func (l *Server) Port() int { return l.port }

// DataDir returns the server's data directory.
func (l *Server) DataDir() string { return l.dataDir }

// StopImmediate stops the server the way `pg_ctl stop -m immediate` does:
// SIGQUIT, no checkpoint, crash recovery on the next start. It returns once
// the postmaster has exited, or kills it and returns ctx's error when ctx
// ends first. Stopping a stopped server does nothing.
func (l *Server) StopImmediate(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.proc
	if p == nil {
		return nil
	}
	l.proc = nil
	_ = p.cmd.Process.Signal(sigImmediate)
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		p.kill()
		return fmt.Errorf("pgserver: stop immediate: %w", ctx.Err())
	}
}

// Start starts a stopped server again on the same port and data directory
// and waits until it accepts connections. Starting a running server does
// nothing.
func (l *Server) Start(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("pgserver: start: server closed")
	}
	if l.proc != nil {
		return nil
	}
	p, err := l.launch(ctx)
	if err != nil {
		return fmt.Errorf("pgserver: start: %w", err)
	}
	l.proc = p
	return nil
}

// Close stops the server (fast shutdown, SIGKILL if that takes longer than
// 10 s) and removes its directory. Closing twice does nothing.
func (l *Server) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.proc != nil {
		l.proc.stop(sigFast, stopTimeout)
		l.proc = nil
	}
	return removeAll(l.dir)
}

func (l *Server) initdb(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, l.bin.Initdb,
		"-D", l.dataDir, "-U", "postgres", "-A", "trust",
		"--no-sync", "-E", "UTF8", "--locale=C")
	cmd.Dir = l.dir
	cmd.SysProcAttr = procAttr(l.user)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, tail(out))
	}
	return nil
}

// launch starts the postmaster and waits until it accepts connections.
func (l *Server) launch(ctx context.Context) (*postmaster, error) {
	args := append(slices.Clone(l.args), "-p", strconv.Itoa(l.port))
	p, err := startPostmaster(l.bin.Postgres, args, l.dir, filepath.Join(l.dir, logName), l.user)
	if err != nil {
		return nil, err
	}
	if err := l.waitReady(ctx, p); err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

func (l *Server) waitReady(ctx context.Context, p *postmaster) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	cfg, err := pgx.ParseConfig(l.ConnString("postgres"))
	if err != nil {
		return err
	}
	cfg.ConnectTimeout = 2 * time.Second
	for {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-p.done:
			err := fmt.Errorf("postgres exited during startup (%v); %s log:\n%s",
				p.err, filepath.Join(l.dir, logName), l.logTail())
			if portInUse(l.port) {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		case <-ctx.Done():
			return fmt.Errorf("wait for postgres on port %d: %w (last error: %v); log:\n%s",
				l.port, ctx.Err(), err, l.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (l *Server) logTail() string {
	b, err := os.ReadFile(filepath.Join(l.dir, logName))
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return tail(b)
}

// postmaster is a running postgres server process.
type postmaster struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // exit status; read only after done is closed
}

func startPostmaster(path string, args []string, dir, logPath string, user *osUser) (*postmaster, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// The postmaster outlives the ctx of whoever started it, so this is not
	// CommandContext; Close and StopImmediate end it.
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = procAttr(user)
	err = cmd.Start()
	// The child holds its own descriptor for the log.
	_ = logFile.Close()
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	p := &postmaster{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop sends sig and waits up to grace for the process to exit, then kills it.
func (p *postmaster) stop(sig os.Signal, grace time.Duration) {
	_ = p.cmd.Process.Signal(sig)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.kill()
	}
}

func (p *postmaster) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// makeServerDir creates the server's temporary directory, owned by user
// when the server runs as another user, and marks it with our pid so a
// later run can remove it if this process dies without cleaning up. With
// inMemory it is in memory (see memoryDir) when the machine has room.
func makeServerDir(user *osUser, inMemory bool) (string, error) {
	parent := os.TempDir()
	if m := memoryDir(); inMemory && m != "" && (user == nil || traversableByOthers(m)) {
		parent = m
	}
	if user != nil && !traversableByOthers(parent) {
		// The server user must reach its directory; /tmp always lets it.
		parent = "/tmp"
	}
	sweepStaleDirs(parent)
	dir, err := os.MkdirTemp(parent, dirPrefix)
	if err != nil {
		return "", fmt.Errorf("create server dir: %w", err)
	}
	err = os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644)
	if err == nil && user != nil {
		err = os.Chown(dir, user.uid, user.gid)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("prepare server dir: %w", err)
	}
	return dir, nil
}

// sweepStaleDirs removes server directories left behind by test processes
// that died without Close (a panic, a test timeout). The postmaster of such
// a directory is gone too: it gets SIGQUIT when its parent dies.
func sweepStaleDirs(parent string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, dirPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not ours, or still being set up
		}
		owner, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || owner <= 0 || processAlive(owner) || postmasterAlive(dir) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

// postmasterAlive reports whether the postmaster.pid in dir's data
// directory names a live process.
func postmasterAlive(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	return err == nil && pid > 0 && processAlive(pid)
}

func traversableByOthers(dir string) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
}

// removeAll retries briefly: backends of a killed postmaster may still be
// writing files while they notice that it died.
func removeAll(dir string) error {
	var err error
	for range 10 {
		if err = os.RemoveAll(dir); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("pgserver: remove %s: %w", dir, err)
}

// freePort asks the kernel for a free TCP port on 127.0.0.1. Another
// process may take it before postgres binds it; startLocal then retries.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	return port, nil
}

func portInUse(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return true
	}
	_ = ln.Close()
	return false
}

// tail returns about the last 4 KiB of b, starting at a line.
func tail(b []byte) string {
	const limit = 4096
	if len(b) > limit {
		b = b[len(b)-limit:]
		if i := strings.IndexByte(string(b), '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return strings.TrimRight(string(b), "\n")
}
