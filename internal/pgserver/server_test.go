package pgserver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestStart(t *testing.T) {
	t.Parallel()

	t.Run("SurvivesImmediateStop", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a server surviving a stop right after its start")
		ctx := t.Context()
		l, err := Start(ctx, Options{Settings: map[string]string{
			"work_mem":        "7MB", // added
			"max_connections": "40",  // overrides a default
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		port := l.Port()
		if port == 5432 {
			t.Logf("the kernel handed out 5432")
		}

		conn := connect(t, l.ConnString("postgres"))
		var workMem, maxConns string
		if err := conn.QueryRow(ctx, `SELECT current_setting('work_mem'), current_setting('max_connections')`).Scan(&workMem, &maxConns); err != nil {
			t.Fatal(err)
		}
		if workMem != "7MB" || maxConns != "40" {
			t.Errorf("work_mem, max_connections = %s, %s; want 7MB, 40 from Options.Settings", workMem, maxConns)
		}
		if _, err := conn.Exec(ctx, `CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before crash')`); err != nil {
			t.Fatal(err)
		}

		if err := l.StopImmediate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := conn.Ping(ctx); err == nil {
			t.Error("connection still works after StopImmediate")
		}
		if c, err := connectQuickly(ctx, l.ConnString("postgres")); err == nil {
			_ = c.Close(ctx)
			t.Fatal("new connection succeeded while the server is stopped")
		}
		if err := l.StopImmediate(ctx); err != nil {
			t.Errorf("second StopImmediate: %v", err)
		}

		if err := l.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if l.Port() != port {
			t.Errorf("port after restart = %d, want %d", l.Port(), port)
		}
		var v string
		if err := connect(t, l.ConnString("postgres")).QueryRow(ctx, `SELECT v FROM kept`).Scan(&v); err != nil {
			t.Fatalf("read row after restart: %v", err)
		}
		if v != "before crash" {
			t.Errorf("row = %q, want %q", v, "before crash")
		}

		dir := filepath.Dir(l.DataDir())
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("server dir %s not removed: %v", dir, err)
		}
		if portInUse(port) {
			t.Errorf("port %d still in use after Close", port)
		}
		if err := l.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if err := l.Start(ctx); err == nil {
			t.Error("Start after Close succeeded")
		}
	})
}

func TestStartInMemory(t *testing.T) {
	t.Parallel()
	mem := memoryDir()
	if mem == "" {
		t.Skip("no tmpfs with room at /dev/shm: InMemory servers live in the temporary directory")
	}
	ctx := t.Context()
	l, err := Start(ctx, Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if dir := filepath.Dir(l.DataDir()); filepath.Dir(dir) != mem {
		t.Errorf("server dir %s, want one in %s", dir, mem)
	}
	conn := connect(t, l.ConnString("postgres"))
	if _, err := conn.Exec(ctx, `CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before crash')`); err != nil {
		t.Fatal(err)
	}
	if err := l.StopImmediate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var v string
	if err := connect(t, l.ConnString("postgres")).QueryRow(ctx, `SELECT v FROM kept`).Scan(&v); err != nil {
		t.Fatalf("read row after restart: %v", err)
	}
}

func connectQuickly(ctx context.Context, connString string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	cfg.ConnectTimeout = 2 * time.Second
	return pgx.ConnectConfig(ctx, cfg)
}

func TestSweepStaleDirs(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()

	// A finished process's pid is free (the kernel may reuse it, which only
	// makes the sweep keep the directory).
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	stale := mkOwnedDir(t, parent, dirPrefix+"stale", done.Process.Pid)
	live := mkOwnedDir(t, parent, dirPrefix+"live", os.Getpid())
	foreign := filepath.Join(parent, dirPrefix+"foreign")
	if err := os.Mkdir(foreign, 0o700); err != nil {
		t.Fatal(err)
	}

	sweepStaleDirs(parent)

	for dir, wantKept := range map[string]bool{stale: processAlive(done.Process.Pid), live: true, foreign: true} {
		_, err := os.Stat(dir)
		if kept := err == nil; kept != wantKept {
			t.Errorf("%s kept = %v, want %v", filepath.Base(dir), kept, wantKept)
		}
	}
}

func mkOwnedDir(t *testing.T, parent, name string, pid int) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// connect opens a connection closed when the test ends.
func connect(t *testing.T, connString string) *pgx.Conn {
	t.Helper()
	conn, err := connectQuickly(t.Context(), connString)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(t.Context())) })
	return conn
}
