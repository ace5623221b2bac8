package redislock_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testdb"
)

// shared is the server of the tests that neither kill nor pause it.
var shared *redisServer

// TestMain starts the shared redis-server, gives every test a PostgreSQL
// database of its own (internal/testdb), and fails a passing run that
// leaks goroutines. Without redis-server the package is skipped, with a
// message, except under CI=true, where that fails.
func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) != "" {
		os.Exit(m.Run()) // a child process: see TestHelperProcess
	}
	s, err := startRedis()
	if err != nil {
		msg := fmt.Sprintf("redislock: no redis-server to test against (install Debian's redis-server package): %v", err)
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "FAIL:", msg)
			os.Exit(1)
		}
		fmt.Println("SKIP:", msg)
		os.Exit(0)
	}
	shared = s
	code := testdb.Main(m, pgqueue.Migrate)
	s.close()
	os.Exit(code)
}
