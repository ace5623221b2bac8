package pgbouncer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	shipped "github.com/pgqueue/pgqueue/deploy/pgbouncer"
)

// Binary is the program started: Debian's pgbouncer package.
const Binary = "pgbouncer"

// ErrNotInstalled is returned by Start when pgbouncer is not on PATH.
var ErrNotInstalled = errors.New("pgbouncer not installed (apt-get install pgbouncer)")

// Options shape the pooler. The zero value runs the shipped
// configuration (deploy/pgbouncer/pgbouncer.ini) as it is.
type Options struct {
	// PoolSize, when positive, replaces the shipped default_pool_size:
	// server connections per database and user. Tests that want clients
	// to share backends make it small.
	PoolSize int
}

// Server is a running pgbouncer.
type Server struct {
	dir      string
	cmd      *exec.Cmd
	upstream *pgx.ConnConfig
	password string // the test user's, in the auth file and ConnString
	port     int
	done     chan struct{}
}

// Require starts a pgbouncer in front of the server of connString for the
// test and returns it; it stops when the test ends. Without pgbouncer the
// test is skipped, or failed when CI=true.
func Require(tb testing.TB, connString string, opts *Options) *Server {
	tb.Helper()
	s, err := Start(context.Background(), connString, opts)
	if errors.Is(err, ErrNotInstalled) && os.Getenv("CI") != "true" {
		tb.Skipf("%v; skipping the test through a real pooler", err)
	}
	if err != nil {
		tb.Fatalf("start pgbouncer: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("stop pgbouncer: %v", err)
		}
	})
	return s
}

// Start starts a pgbouncer in transaction mode on a free port of 127.0.0.1
// in front of the server connString names (any database of it), and waits
// until it answers. The caller must Close it.
func Start(ctx context.Context, connString string, opts *Options) (_ *Server, err error) {
	bin, err := exec.LookPath(Binary)
	if err != nil {
		return nil, ErrNotInstalled
	}
	up, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: upstream: %w", err)
	}
	if opts == nil {
		opts = &Options{}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	dir, err := os.MkdirTemp("", "pgbouncer-test-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	// Clients log in as the upstream's user with its password (or one of
	// the test's, which a server that trusts the user ignores), through
	// the shipped auth_type; PgBouncer logs in upstream with the same.
	password := cmp.Or(up.Password, "pgbouncer-test")
	upstream := fmt.Sprintf("host=%s port=%d", up.Host, up.Port)
	set := map[string]string{
		"listen_addr":     "127.0.0.1",
		"listen_port":     strconv.Itoa(port),
		"unix_socket_dir": "",
		"auth_file":       filepath.Join(dir, "userlist.txt"),
		"admin_users":     up.User,
		"logfile":         filepath.Join(dir, "pgbouncer.log"),
		"pidfile":         filepath.Join(dir, "pgbouncer.pid"),
	}
	if opts.PoolSize > 0 {
		set["default_pool_size"] = strconv.Itoa(opts.PoolSize)
	}
	ini, err := Render(shipped.INI, upstream, set)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o644); err != nil {
		return nil, err
	}
	userlist := shipped.Userlist + fmt.Sprintf("%q %q\n", up.User, password)
	if err := os.WriteFile(filepath.Join(dir, "userlist.txt"), []byte(userlist), 0o644); err != nil {
		return nil, err
	}
	s := &Server{dir: dir, upstream: up, password: password, port: port, done: make(chan struct{})}
	s.cmd = exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	// What it says before its log file is open (a setting it refuses).
	stderr, err := os.Create(filepath.Join(dir, "stderr.log"))
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	s.cmd.Stdout, s.cmd.Stderr = stderr, stderr
	attr, err := procAttr(dir)
	if err != nil {
		return nil, err
	}
	s.cmd.SysProcAttr = attr
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("pgbouncer: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	if err := s.await(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// await waits until a query through the pooler answers.
func (s *Server) await(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cs := s.ConnString(s.upstream.Database)
	for {
		conn, err := pgx.Connect(ctx, cs)
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT 1", pgx.QueryExecModeSimpleProtocol)
			_ = conn.Close(ctx)
			if err == nil {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("pgbouncer exited: %s", s.Log())
		case <-ctx.Done():
			return fmt.Errorf("pgbouncer on port %d did not answer: %w (log: %s)", s.port, err, s.Log())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ConnString returns a connection string for database dbname through the
// pooler.
func (s *Server) ConnString(dbname string) string {
	u := url.URL{Scheme: "postgres", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)), Path: "/" + dbname, RawQuery: "sslmode=disable",
		User: url.UserPassword(s.upstream.User, s.password)}
	return u.String()
}

// Log returns what pgbouncer logged so far.
func (s *Server) Log() string {
	early, _ := os.ReadFile(filepath.Join(s.dir, "stderr.log"))
	b, _ := os.ReadFile(filepath.Join(s.dir, "pgbouncer.log"))
	return string(early) + string(b)
}

// Close stops pgbouncer, closing its server connections (and so ending
// their sessions), and removes its files.
func (s *Server) Close() error {
	select {
	case <-s.done:
	default:
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
	return os.RemoveAll(s.dir)
}

// procAttr runs pgbouncer as the postgres user when we are root (it
// refuses root), in its own process group, killed if the test dies.
func procAttr(dir string) (*syscall.SysProcAttr, error) {
	attr := &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(attr)
	if os.Geteuid() != 0 {
		return attr, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgbouncer refuses root and needs the postgres OS user: %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return attr, nil
}
