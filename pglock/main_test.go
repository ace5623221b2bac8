package pglock_test

import (
	"os"
	"testing"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testdb"
)

// TestMain gives every test a database of its own, cloned from a template
// migrated by pgqueue.Migrate (advisory locks are per database, so tests
// do not see each other's), and fails a passing run that leaks goroutines.
func TestMain(m *testing.M) { os.Exit(testdb.Main(m, pgqueue.Migrate)) }
