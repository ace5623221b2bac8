package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/pgqueue/pgqueue/internal/pgtest"
)

func TestMain(m *testing.M) {
	// No set-up: the demo migrates its own schema. Its log files go to a
	// directory of the run's, removed at the end.
	dir, err := os.MkdirTemp("", "pgqueue-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	demoLogDir = dir
	code := pgtest.Main(m, nil)
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// runCLI runs the command line args in process and returns its exit code
// and output.
func runCLI(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRun(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // a substring; "" checks nothing
		wantStderr string // a substring; "" checks nothing
	}{
		{"NoCommand", nil, exitUsage, "", "Usage:"},
		{"UnknownCommand", []string{"frobnicate"}, exitUsage, "", `unknown command "frobnicate"`},
		{"Help", []string{"help"}, exitOK, "Commands:", ""},
		{"DashH", []string{"-h"}, exitOK, "Commands:", ""},
		{"HelpMigrate", []string{"help", "migrate"}, exitOK, "down --all", ""},
		{"HelpDemo", []string{"help", "demo"}, exitOK, "--jobs N", ""},
		{"HelpUnknown", []string{"help", "frobnicate"}, exitUsage, "", `unknown command "frobnicate"`},
		{"HelpTooMany", []string{"help", "migrate", "demo"}, exitUsage, "", "at most one command"},
		{"MigrateDashH", []string{"migrate", "-h"}, exitOK, "Usage: pgqueue migrate", ""},
		{"MigrateBareDown", []string{"migrate", "down", "--database-url", "postgres://x"}, exitUsage, "", "Run 'pgqueue help migrate' for usage."},
		{"MigrateUnknownFlag", []string{"migrate", "up", "--frob"}, exitUsage, "", "flag provided but not defined: -frob"},
		{"MigrateNoDatabase", []string{"migrate", "up", "--database-url="}, exitUsage, "", "no database"},
		{"DemoDashH", []string{"demo", "--help"}, exitOK, "Usage: pgqueue demo", ""},
		{"DemoArgument", []string{"demo", "now"}, exitUsage, "", "demo takes no arguments"},
		{"DemoNoJobs", []string{"demo", "--jobs", "0"}, exitUsage, "", "--jobs must be at least 1"},
		{"DemoBadTimeout", []string{"demo", "--timeout", "-1s"}, exitUsage, "", "--timeout must be positive"},
		{"DemoBadSchema", []string{"demo", "--schema", "Demo"}, exitUsage, "", "invalid --schema"},
		// Nothing listens on port 1: a failure to connect is an error, not
		// a usage error.
		{"MigrateUnreachable", []string{"migrate", "version", "--database-url", "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=5"}, exitError, "", "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCLI(t.Context(), tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, stdout, stderr)
			}
			if !strings.Contains(stdout, tt.wantStdout) {
				t.Errorf("stdout does not contain %q:\n%s", tt.wantStdout, stdout)
			}
			if !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("stderr does not contain %q:\n%s", tt.wantStderr, stderr)
			}
		})
	}
}
