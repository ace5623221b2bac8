package pgtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Go's test cache re-runs a test binary when a variable it read changed;
// it learns them from the binary's -test.testlogfile. A child run of this
// test against the shared server (through DATABASE_URL) must log the
// variables the harness consults.
func TestEnvReadsRecorded(t *testing.T) {
	skipInShortMode(t, "the environment reads recorded for go test's cache")
	if os.Getenv("PGTEST_ENV_CHILD") == "1" {
		DB() // what a test does: the reads must be logged from here
		return
	}
	t.Parallel()
	logFile := filepath.Join(t.TempDir(), "testlog")
	cmd := exec.Command(os.Args[0], "-test.run=^TestEnvReadsRecorded$", "-test.testlogfile="+logFile)
	cmd.Env = append(os.Environ(), "PGTEST_ENV_CHILD=1", "DATABASE_URL="+Shared().AdminConnString())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"DATABASE_URL", "PATH"} {
		if !strings.Contains(string(b), "getenv "+k+"\n") {
			t.Errorf("the test log does not record %s, so go test would answer (cached) after a change:\n%s", k, b)
		}
	}
}
