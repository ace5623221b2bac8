package pgtest

import "os"

// harnessEnv are the variables Main consults: DATABASE_URL, PATH (for
// the local binaries), Docker's for testcontainers (read by pgcontainer,
// which inherits them), and the connection budget.
var harnessEnv = []string{"DATABASE_URL", "PATH", "DOCKER_HOST", "TESTCONTAINERS_HOST_OVERRIDE", "TESTCONTAINERS_RYUK_DISABLED", MaxConnsEnv}

// recordEnv reads the variables Start consulted again, from inside
// m.Run. Go's test cache keys a cached result on the variables the test
// binary read, but it records only reads made while m.Run runs: Main
// reads them before, so without this a changed DATABASE_URL was answered
// "(cached)" from a run against another server.
func recordEnv() {
	for _, k := range harnessEnv {
		_ = os.Getenv(k)
	}
}
