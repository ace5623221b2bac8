package pgtest

import (
	"flag"
	"fmt"
	"os"
	"strconv"
)

// MaxConnsEnv names the variable that caps the connections one test
// binary, its child processes included, opens to the server: a shared
// server (DATABASE_URL) has max_connections for every run on it, and
// go test runs several package binaries at once.
const MaxConnsEnv = "PGQUEUE_TEST_MAX_CONNS"

const (
	// defaultMaxConns is MaxConns when MaxConnsEnv is unset: two binaries
	// at once (go test's -p on two cores) stay under 100 connections.
	defaultMaxConns = 40
	// testConns is what one running test's pools and children may hold
	// at most: the binary runs MaxConns / testConns tests at once.
	testConns = 20
)

// MaxConns returns the connection budget of this test binary:
// PGQUEUE_TEST_MAX_CONNS, or 40.
func MaxConns() int {
	n, err := strconv.Atoi(os.Getenv(MaxConnsEnv))
	if err != nil || n < 1 {
		return defaultMaxConns
	}
	return n
}

// TestConns returns how many connections one running test may hold,
// across all its pools and child processes: 20, or the whole budget when
// MaxConns is smaller. A test sizes its pools from it.
func TestConns() int {
	return min(testConns, MaxConns())
}

// limitParallel lowers -test.parallel so that the tests running at once
// hold at most MaxConns connections together.
func limitParallel() error {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.parallel")
	if f == nil {
		return nil
	}
	cur, err := strconv.Atoi(f.Value.String())
	if err != nil {
		return nil
	}
	if limit := max(1, MaxConns()/TestConns()); cur > limit {
		if err := f.Value.Set(strconv.Itoa(limit)); err != nil {
			return fmt.Errorf("pgtest: limit -test.parallel to %d: %w", limit, err)
		}
	}
	return nil
}
