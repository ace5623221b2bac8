package pgqueue_test

import (
	"os"
	"testing"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testdb"
)

// TestMain starts the test server, migrates the template database that
// newPool clones, and checks for leaked goroutines. Started as a child
// process by a test (see childProcess), it runs that child's part instead.
func TestMain(m *testing.M) {
	if code, ok := runChild(); ok {
		os.Exit(code)
	}
	os.Exit(testdb.Main(m, pgqueue.Migrate))
}
