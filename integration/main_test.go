// Package integration tests pgqueue from the outside: built binaries and
// real processes against a real PostgreSQL server.
package integration

import (
	"os"
	"testing"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testdb"
)

func TestMain(m *testing.M) { os.Exit(testdb.Main(m, pgqueue.Migrate)) }
