package pgqueue_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A program that imports pgqueue, or pgqueuetest in its tests, gets no
// testcontainers-go in its go.sum: the suite's Docker fallback lives in a
// module of its own (internal/pgtest/pgcontainer). Docker's client
// modules still appear, only as checksums, because golang-migrate's
// pgx/v5 driver tests with dhui/dktest and go mod tidy records what the
// tests of imported packages need; the test holds every Docker entry to
// that path. It builds a fresh module against this checkout with go mod
// tidy, which needs the module proxy: offline it skips.
func TestImporterGoSum(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: runs go mod tidy on a fresh module")
	}
	root, err := filepath.Abs(".")
	must(t, err)
	for _, tt := range []struct{ name, pkg string }{
		{"Root", "github.com/pgqueue/pgqueue"},
		{"Pgqueuetest", "github.com/pgqueue/pgqueue/pgqueuetest"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			write := func(name, text string) {
				t.Helper()
				must(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
			}
			write("go.mod", "module x\n\ngo 1.26.0\n\nrequire github.com/pgqueue/pgqueue v0.0.0\n\nreplace github.com/pgqueue/pgqueue => "+root+"\n")
			write("main.go", "package main\n\nimport _ \""+tt.pkg+"\"\n\nfunc main() {}\n")
			goCmd := func(args ...string) (string, error) {
				cmd := exec.CommandContext(t.Context(), "go", args...)
				cmd.Dir = dir
				// The module is thrown away and only the names in its
				// go.sum are read: no checksum database needed.
				cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOSUMDB=off")
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			if out, err := goCmd("mod", "tidy"); err != nil {
				if offline.MatchString(out) {
					t.Skipf("go mod tidy cannot reach the module proxy: %s", out)
				}
				t.Fatalf("go mod tidy: %v\n%s", err, out)
			}
			sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
			must(t, err)
			docker := map[string]bool{}
			sc := bufio.NewScanner(strings.NewReader(string(sum)))
			for sc.Scan() {
				mod, _, _ := strings.Cut(sc.Text(), " ")
				switch {
				case strings.Contains(mod, "testcontainers"):
					t.Errorf("go.sum holds %s", sc.Text())
				case strings.Contains(mod, "docker") || strings.Contains(mod, "moby"):
					docker[mod] = true
				}
			}
			if len(docker) == 0 {
				return
			}
			mods := make([]string, 0, len(docker))
			for m := range docker {
				mods = append(mods, m)
			}
			slices.Sort(mods)
			out, err := goCmd(append([]string{"mod", "why", "-m"}, mods...)...)
			if err != nil {
				t.Fatalf("go mod why: %v\n%s", err, out)
			}
			for _, block := range strings.Split(out, "# ")[1:] {
				if !strings.Contains(block, "github.com/golang-migrate/migrate/v4") {
					t.Errorf("a Docker module not pulled by golang-migrate:\n# %s", block)
				}
			}
			t.Logf("Docker modules in go.sum, all through golang-migrate's tests: %s", strings.Join(mods, " "))
		})
	}
}

// offline matches go's messages when the module proxy cannot be reached.
var offline = regexp.MustCompile(`dial tcp|no such host|connection refused|i/o timeout|network is unreachable|GOPROXY=off|TLS handshake`)
