package pgqueue_test

import (
	"os"
	"testing"

	"github.com/pgqueue/pgqueue/internal/testdb"
)

// TestMain starts the test server, migrates the template database that
// newPool clones, and checks for leaked goroutines.
func TestMain(m *testing.M) { os.Exit(testdb.Main(m)) }
