package workerkit_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/workerkit"
)

// run runs a worker program in process; every case here ends before a
// signal is needed.
func run(t *testing.T, opts *workerkit.Options, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = workerkit.Run(t.Context(), opts, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func someWorkers() *pgqueue.Workers {
	ws := pgqueue.NewWorkers()
	pgqueue.AddWorkerFunc(ws, func(context.Context, *pgqueue.Job[quickArgs]) error { return nil }, nil)
	return ws
}

func TestRunFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() })

	tests := []struct {
		name     string
		opts     *workerkit.Options
		args     []string
		wantCode int
		want     string // in stdout or stderr
	}{
		{"Help", nil, []string{"--help"}, workerkit.ExitOK, "PGQUEUE_SHUTDOWN_TIMEOUT"},
		{"UnknownFlag", nil, []string{"--frob"}, workerkit.ExitUsage, "flag provided but not defined"},
		{"Arguments", nil, []string{"--database-url", b.url, "now"}, workerkit.ExitUsage, "unexpected arguments"},
		{"NoDatabase", nil, []string{"--database-url="}, workerkit.ExitUsage, "no database"},
		{"BadQueues", nil, []string{"--database-url", b.url, "--queues", "default=0"}, workerkit.ExitUsage, "at least 1"},
		{"BadSchema", nil, []string{"--database-url", b.url, "--schema", "Nope"}, workerkit.ExitUsage, "invalid schema"},
		{"BadLogFormat", nil, []string{"--database-url", b.url, "--log-format", "xml"}, workerkit.ExitUsage, "--log-format"},
		{"NoWorkers", &workerkit.Options{}, []string{"--database-url", b.url}, workerkit.ExitFailed, "no workers"},
		{"NotMigrated", &workerkit.Options{Workers: someWorkers()}, []string{"--database-url", b.url, "--schema", "elsewhere"}, workerkit.ExitFailed, `schema \"elsewhere\" is not migrated`},
		{"ListenerTaken", &workerkit.Options{Workers: someWorkers()}, []string{"--database-url", b.url, "--http-addr", busy.Addr().String()}, workerkit.ExitFailed, "listen"},
		{"SetupFails", &workerkit.Options{Workers: someWorkers(), Setup: func(context.Context, *workerkit.Env) error { return context.DeadlineExceeded }},
			[]string{"--database-url", b.url}, workerkit.ExitFailed, "setup: context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := run(t, tt.opts, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, stdout, stderr)
			}
			if !strings.Contains(stdout+stderr, tt.want) {
				t.Errorf("output lacks %q\nstdout: %s\nstderr: %s", tt.want, stdout, stderr)
			}
		})
	}

	t.Run("NotMigratedCreatesNothing", func(t *testing.T) {
		var n int
		if err := b.pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_namespace WHERE nspname = 'elsewhere'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Error("the schema check created the schema")
		}
	})
}

// TestRunMigrates checks --migrate on a database with no schema yet, and
// that the end of Run's context stops the worker like a signal.
func TestRunMigrates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	opts := &workerkit.Options{Workers: someWorkers(), Setup: func(context.Context, *workerkit.Env) error {
		cancel() // started far enough: stop it once running
		return nil
	}}
	var out, errOut bytes.Buffer
	code := workerkit.Run(ctx, opts, []string{"--database-url", b.url, "--schema", "fresh", "--migrate", "--log-format", "text"}, &out, &errOut)
	if code != workerkit.ExitOK {
		t.Fatalf("exit code %d\n%s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), `migrated" schema=fresh from=0 to=`) {
		t.Errorf("no migration line:\n%s", errOut.String())
	}
}

// TestRunKeepsSetupObserver checks that the kit's metrics wrap an
// Observer set in Setup instead of replacing it.
func TestRunKeepsSetupObserver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	recorded := make(chan pgqueue.Outcome, 1)
	opts := &workerkit.Options{Workers: someWorkers(), Setup: func(ctx context.Context, env *workerkit.Env) error {
		env.Config.Observer = &pgqueue.Observer{ResultRecorded: func(job *pgqueue.JobRow, result pgqueue.Outcome) {
			select {
			case recorded <- result:
			default:
			}
		}}
		return nil
	}}
	done := make(chan int)
	go func() {
		done <- workerkit.Run(ctx, opts, []string{"--database-url", b.url}, io.Discard, io.Discard)
	}()
	if _, err := b.client.Enqueue(t.Context(), quickArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-recorded:
		if r != pgqueue.OutcomeCompleted {
			t.Errorf("result %s", r)
		}
	case code := <-done:
		t.Fatalf("Run returned %d", code)
	case <-time.After(30 * time.Second):
		t.Fatal("the Setup's Observer was not called")
	}
	cancel()
	if code := <-done; code != workerkit.ExitOK {
		t.Errorf("exit code %d", code)
	}
}
