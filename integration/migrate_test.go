package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/migrations"
)

func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "the migrate command's concurrent up, down then up, and force")
	bin := buildCLI(t)
	latest := latestMigration(t)

	t.Run("ConcurrentUpAppliesOnce", func(t *testing.T) {
		t.Parallel()
		// The template migrated the default schema only: this one is
		// empty.
		const schema = "concurrent_test"
		url := pgtest.DB().NewDatabase(t)

		cmds := make([]*exec.Cmd, 4)
		stdouts := make([]bytes.Buffer, len(cmds))
		stderrs := make([]bytes.Buffer, len(cmds))
		for i := range cmds {
			cmds[i] = exec.CommandContext(t.Context(), bin, "migrate", "up", "--schema", schema, "--database-url", url)
			cmds[i].Stdout, cmds[i].Stderr = &stdouts[i], &stderrs[i]
		}
		// All started before any is waited for, so that they race.
		for i, cmd := range cmds {
			if err := cmd.Start(); err != nil {
				t.Fatalf("start process %d: %v", i, err)
			}
		}
		migrated := 0
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Errorf("process %d: %v\nstdout: %s\nstderr: %s", i, err, &stdouts[i], &stderrs[i])
			}
			switch out := stdouts[i].String(); {
			case strings.HasPrefix(out, "migrated "):
				migrated++
			case !strings.HasPrefix(out, "nothing to do: "):
				t.Errorf("process %d printed %q, want a migration or nothing to do", i, out)
			}
		}
		if migrated != 1 {
			t.Errorf("%d processes say they migrated, want 1; outputs: %q %q %q %q", migrated, &stdouts[0], &stdouts[1], &stdouts[2], &stdouts[3])
		}

		conn := connect(t, url)
		var (
			version int64
			dirty   bool
			jobs    bool
		)
		if err := conn.QueryRow(t.Context(), "SELECT version, dirty FROM concurrent_test.schema_migrations").Scan(&version, &dirty); err != nil {
			t.Fatal(err)
		}
		if version != latest || dirty {
			t.Errorf("schema_migrations says version %d, dirty %t; want %d, clean", version, dirty, latest)
		}
		if err := conn.QueryRow(t.Context(), "SELECT to_regclass('concurrent_test.jobs') IS NOT NULL").Scan(&jobs); err != nil {
			t.Fatal(err)
		}
		if !jobs {
			t.Error("concurrent_test.jobs does not exist")
		}
	})

	t.Run("DownThenUpAgain", func(t *testing.T) {
		t.Parallel()
		// The database from DATABASE_URL, the default schema.
		env := []string{"DATABASE_URL=" + pgtest.DB().NewDatabase(t)}

		steps := []struct {
			args string
			want string
		}{
			{"version", fmt.Sprint(latest)},
			{"down 1", fmt.Sprintf("reverted pgqueue from version %d to %d", latest, latest-1)},
			{"version", versionText(latest - 1)},
			{"down --all", fmt.Sprintf("reverted pgqueue from version %d to 0", latest-1)},
			{"version", "none"},
			{"down --all", "nothing to do: pgqueue has no migrations applied"},
			{"up", fmt.Sprintf("migrated pgqueue from version 0 to %d", latest)},
			{"version", fmt.Sprint(latest)},
			{"up", fmt.Sprintf("nothing to do: pgqueue is at version %d", latest)},
		}
		if latest == 1 {
			steps = append(steps[:3], steps[5:]...) // down 1 already reverted all
		}
		for _, s := range steps {
			got := runOK(t, bin, env, "migrate "+s.args)
			if got != s.want {
				t.Fatalf("pgqueue migrate %s printed %q, want %q", s.args, got, s.want)
			}
		}
	})

	t.Run("ForceClearsDirty", func(t *testing.T) {
		t.Parallel()
		url := pgtest.DB().NewDatabase(t)
		env := []string{"DATABASE_URL=" + url}
		// As a migration that failed half-way leaves it.
		if _, err := connect(t, url).Exec(t.Context(), "UPDATE pgqueue.schema_migrations SET dirty = true"); err != nil {
			t.Fatal(err)
		}
		if got, want := runOK(t, bin, env, "migrate version"), fmt.Sprintf("%d (dirty)", latest); got != want {
			t.Fatalf("version printed %q, want %q", got, want)
		}
		code, stdout, stderr := runCLI(t, bin, env, "migrate up")
		if code != 1 || !strings.Contains(strings.ToLower(stderr), "dirty") {
			t.Fatalf("up on a dirty schema: exit code %d, want 1 with an error about it\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
		if got, want := runOK(t, bin, env, fmt.Sprintf("migrate force %d", latest)), fmt.Sprintf("forced pgqueue to version %d", latest); got != want {
			t.Fatalf("force printed %q, want %q", got, want)
		}
		if got, want := runOK(t, bin, env, "migrate version"), fmt.Sprint(latest); got != want {
			t.Fatalf("version after force printed %q, want %q", got, want)
		}
		if got, want := runOK(t, bin, env, "migrate up"), fmt.Sprintf("nothing to do: pgqueue is at version %d", latest); got != want {
			t.Fatalf("up after force printed %q, want %q", got, want)
		}
	})
}

// buildCLI builds cmd/pgqueue into the test's temporary directory and
// returns the binary's path.
func buildCLI(t *testing.T) string {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "pgqueue")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/pgqueue")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/pgqueue: %v\n%s", err, out)
	}
	return bin
}

// latestMigration returns the highest version among the migration files.
func latestMigration(t *testing.T) int64 {
	t.Helper()
	names, err := fs.Glob(migrations.FS, "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	var latest int64
	for _, name := range names {
		prefix, _, _ := strings.Cut(name, "_")
		v, err := strconv.ParseInt(prefix, 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", name, err)
		}
		latest = max(latest, v)
	}
	if latest == 0 {
		t.Fatal("no migrations found")
	}
	return latest
}

func versionText(v int64) string {
	if v == 0 {
		return "none"
	}
	return fmt.Sprint(v)
}

// runCLI runs the binary with the space-separated args and env added to
// this process's environment, and returns its exit code and output.
func runCLI(t *testing.T, bin string, env []string, args string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(t.Context(), bin, strings.Fields(args)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("pgqueue %s: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

// runOK runs the binary like runCLI, requires success and returns its
// output without the final newline.
func runOK(t *testing.T, bin string, env []string, args string) string {
	t.Helper()
	code, stdout, stderr := runCLI(t, bin, env, args)
	if code != 0 {
		t.Fatalf("pgqueue %s: exit code %d\nstdout: %s\nstderr: %s", args, code, stdout, stderr)
	}
	return strings.TrimSuffix(stdout, "\n")
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	// Closed before the test's database is dropped.
	t.Cleanup(func() { _ = conn.Close(t.Context()) })
	return conn
}
