//go:build unix

package workerproc

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// noDB is a URL nothing listens on: the pool dials lazily, and these
// tests never make it dial.
const noDB = "postgres://u@127.0.0.1:1/db?sslmode=disable"

func TestRun(t *testing.T) {
	t.Run("PassesFlagsAndPoolToRun", func(t *testing.T) {
		var own int
		var got *Worker
		var app string
		var connectTimeout time.Duration
		var maxConns int32
		s := Spec{
			Command: "testworker",
			Flags:   func(fs *flag.FlagSet) { fs.IntVar(&own, "own", 1, "") },
			Pool:    func(cfg *pgxpool.Config) { cfg.MaxConns = 7 },
			Run: func(ctx context.Context, w *Worker) error {
				got = w
				cfg := w.Pool.Config()
				app = cfg.ConnConfig.RuntimeParams["application_name"]
				connectTimeout = cfg.ConnConfig.ConnectTimeout
				maxConns = cfg.MaxConns
				w.Ready()
				w.Say("own=%d", own)
				return nil
			},
		}
		var stdout, stderr bytes.Buffer
		code := run(s, []string{"-db", noDB, "-name", "n1", "-lease", "5s", "-own", "3", "-connect-timeout", "1s"}, &stdout, &stderr)
		if code != 0 {
			t.Fatalf("exit code %d, stderr %q", code, &stderr)
		}
		if got.Name != "n1" || got.AppName != "testworker-n1" || got.Schema != "pgqueue" || got.Lease != 5*time.Second || got.StopTimeout != 10*time.Second {
			t.Errorf("worker = %+v", got)
		}
		if app != "testworker-n1" || connectTimeout != time.Second || maxConns != 7 {
			t.Errorf("pool: application_name %q, connect timeout %s, max conns %d; want testworker-n1, 1s, 7", app, connectTimeout, maxConns)
		}
		if want := "ready\nown=3\n"; stdout.String() != want {
			t.Errorf("stdout %q, want %q", &stdout, want)
		}
	})

	t.Run("BadFlagsExit2", func(t *testing.T) {
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"-name", "n1"}, "testworker: -db or DATABASE_URL is required\n"},
			{[]string{"-db", noDB}, "testworker: -name is required\n"},
			{[]string{"-db", noDB, "-name", "n1", "-mode", "x"}, "testworker: -mode is wrong\n"},
		} {
			t.Setenv("DATABASE_URL", "")
			ran := false
			var mode string
			s := Spec{
				Command: "testworker",
				Flags:   func(fs *flag.FlagSet) { fs.StringVar(&mode, "mode", "", "") },
				Check: func() error {
					if mode == "x" {
						return errors.New("-mode is wrong")
					}
					return nil
				},
				Run: func(context.Context, *Worker) error { ran = true; return nil },
			}
			var stdout, stderr bytes.Buffer
			if code := run(s, tt.args, &stdout, &stderr); code != 2 || ran || stderr.String() != tt.want {
				t.Errorf("%q: exit code %d, ran %v, stderr %q; want 2, not run, %q", tt.args, code, ran, &stderr, tt.want)
			}
		}
		var stderr bytes.Buffer
		if code := run(Spec{Command: "testworker"}, []string{"-nosuch"}, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "testworker: flag provided but not defined: -nosuch") {
			t.Errorf("unknown flag: exit code %d, stderr %q", code, &stderr)
		}
	})

	t.Run("FailedRunExits1", func(t *testing.T) {
		s := Spec{Command: "testworker", Run: func(context.Context, *Worker) error { return errors.New("boom") }}
		var stderr bytes.Buffer
		if code := run(s, []string{"-db", noDB, "-name", "n1"}, &bytes.Buffer{}, &stderr); code != 1 || stderr.String() != "testworker n1: boom\n" {
			t.Errorf("exit code %d, stderr %q; want 1, %q", code, &stderr, "testworker n1: boom\n")
		}
		stderr.Reset()
		if code := run(Spec{Command: "testworker"}, []string{"-db", "not a url", "-name", "n1"}, &bytes.Buffer{}, &stderr); code != 1 || !strings.HasPrefix(stderr.String(), "testworker n1: parse -db: ") {
			t.Errorf("bad -db: exit code %d, stderr %q", code, &stderr)
		}
	})

	t.Run("LogsAtLevelOrDebugWithV", func(t *testing.T) {
		for _, tt := range []struct {
			level slog.Level
			args  []string
			want  []string
		}{
			{slog.LevelWarn, nil, []string{"level=WARN"}},
			{slog.LevelWarn, []string{"-v"}, []string{"level=DEBUG", "level=INFO", "level=WARN"}},
			{0, nil, []string{"level=INFO", "level=WARN"}},
		} {
			s := Spec{Command: "testworker", LogLevel: tt.level, Run: func(_ context.Context, w *Worker) error {
				w.Log.Debug("d")
				w.Log.Info("i")
				w.Log.Warn("w")
				return nil
			}}
			var stderr bytes.Buffer
			if code := run(s, append([]string{"-db", noDB, "-name", "n1"}, tt.args...), &bytes.Buffer{}, &stderr); code != 0 {
				t.Fatalf("exit code %d, stderr %q", code, &stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("level %v %q logged %q, want %v", tt.level, tt.args, lines, tt.want)
			}
			for i, l := range lines {
				if !strings.Contains(l, tt.want[i]) || !strings.Contains(l, "worker=testworker-n1") {
					t.Errorf("line %q, want %s and worker=testworker-n1", l, tt.want[i])
				}
			}
		}
	})

	t.Run("SIGTERMEndsRunsContext", func(t *testing.T) {
		s := Spec{Command: "testworker", Run: func(ctx context.Context, w *Worker) error {
			if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(10 * time.Second):
				return errors.New("SIGTERM did not end the context")
			}
		}}
		var stderr bytes.Buffer
		if code := run(s, []string{"-db", noDB, "-name", "n1"}, &bytes.Buffer{}, &stderr); code != 0 {
			t.Fatalf("exit code %d, stderr %q", code, &stderr)
		}
	})
}
