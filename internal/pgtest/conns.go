package pgtest

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// MaxConnsEnv names the variable that caps the connections one test
// binary, its child processes included, opens to the server: a shared
// server (DATABASE_URL) has max_connections for every run on it, and
// go test runs several package binaries at once.
const MaxConnsEnv = "PGQUEUE_TEST_MAX_CONNS"

const (
	// ownServerConns is MaxConns when MaxConnsEnv is unset and the binary
	// started a server of its own.
	ownServerConns = 40
	// sharedServerConns is what all the binaries go test runs at once
	// (-p, GOMAXPROCS by default) hold together on a server they share
	// (DATABASE_URL) when MaxConnsEnv is unset: each binary takes its share.
	sharedServerConns = 40
	// testConns is what one running test's pools and children may hold
	// at most: the binary runs (MaxConns - harness) / testConns tests at
	// once.
	testConns = 19
	// shortTestConns is testConns under -short: the quick mode's tests
	// are its small ones, and more of them run at once.
	shortTestConns = 9
)

// harnessConns is what the harness that clones and drops the tests'
// databases holds of a budget of n: 2, or 1 in a budget under 4.
func harnessConns(n int) int {
	if n < 4 {
		return 1
	}
	return 2
}

// MaxConns returns the connection budget of this test binary:
// PGQUEUE_TEST_MAX_CONNS; else, on a server shared through DATABASE_URL,
// 40 split between the binaries go test runs at once (one per
// GOMAXPROCS, at least 20 each); else 40 on the binary's own server.
func MaxConns() int {
	if n, err := strconv.Atoi(os.Getenv(MaxConnsEnv)); err == nil && n >= 1 {
		return n
	}
	if os.Getenv("DATABASE_URL") != "" {
		return max(testConns, sharedServerConns/runtime.GOMAXPROCS(0))
	}
	return ownServerConns
}

// TestConns returns how many connections one running test may hold,
// across all its pools and child processes: 19 (9 under -short), or what
// the budget leaves beside the harness's 2 when that is less. A test
// sizes its pools from it.
func TestConns() int {
	per := testConns
	if testing.Short() {
		per = shortTestConns
	}
	n := MaxConns()
	return max(1, min(per, n-harnessConns(n)))
}

// setParallel sets -test.parallel to the tests the connection budget
// holds at once, (MaxConns - harness) / TestConns, rather than go test's
// default of GOMAXPROCS: the tests mostly wait on the server and on
// timers, not on the CPU. A -parallel given on the command line is kept
// when lower.
func setParallel() error {
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
	given := false
	flag.Visit(func(v *flag.Flag) { given = given || v == f })
	n := MaxConns()
	limit := max(1, (n-harnessConns(n))/TestConns())
	if given && cur <= limit {
		return nil
	}
	if err := f.Value.Set(strconv.Itoa(limit)); err != nil {
		return fmt.Errorf("pgtest: set -test.parallel to %d: %w", limit, err)
	}
	return nil
}

// NeedConns is for a test that holds more connections than TestConns (a
// fault suite of many worker processes) and so must not run in parallel
// with others. On a server the binary started itself, sized for that, it
// runs; on a server shared through DATABASE_URL it skips, saying so,
// unless the binary's budget (PGQUEUE_TEST_MAX_CONNS) holds n.
func NeedConns(t testing.TB, n int, what string) {
	t.Helper()
	if os.Getenv("DATABASE_URL") == "" {
		return
	}
	if budget := MaxConns(); n > budget {
		t.Skipf("%s holds about %d connections, over this binary's budget of %d on the shared server: set %s=%d to run it",
			what, n, budget, MaxConnsEnv, n)
	}
}
