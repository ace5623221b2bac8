// Package pgtest gives tests real PostgreSQL servers and a fresh database
// per test.
//
// Start obtains a server without any set-up beyond what the machine has, in
// this order:
//
//  1. DATABASE_URL, if set, used as an admin connection: its role must be
//     allowed to CREATE DATABASE. Close leaves that server alone.
//  2. A throwaway server from local PostgreSQL binaries (initdb and
//     postgres on PATH, under `pg_config --bindir`, or the highest version
//     in /usr/lib/postgresql/*/bin), initialised in a temporary directory
//     (in /dev/shm when Linux has room there)
//     and listening on a free port of 127.0.0.1, with fsync off. As root it
//     runs as the postgres OS user, since initdb and postgres refuse root.
//  3. A postgres:16-alpine container through testcontainers, when Docker
//     answers within a few seconds. The module pgcontainer/ starts it, run
//     with `go run` in its directory: a module of its own keeps
//     testcontainers-go and the Docker client out of pgqueue's go.mod.
//     Only a checkout has that directory (a module zip leaves nested
//     modules out), so importers of pgqueuetest have steps 1 and 2.
//
// Otherwise Start fails with ErrNoServer and says how to provide a server.
//
// Each test binary migrates one template database, and each test gets a
// clone of it (CREATE DATABASE ... TEMPLATE), dropped after the test ends.
// Two connections of the binary's own clone ahead of the tests and drop
// behind them, so that neither waits in a test's time. Advisory locks and NOTIFY channels are per database, so tests isolated
// this way do not see each other even when many test binaries share one
// server:
//
//	func TestMain(m *testing.M) {
//		os.Exit(pgtest.Main(m, func(ctx context.Context, connString string) error {
//			return migrateUp(ctx, connString)
//		}))
//	}
//
//	func TestEnqueue(t *testing.T) {
//		t.Parallel()
//		pool, err := pgxpool.New(t.Context(), pgtest.DB().NewDatabase(t))
//		if err != nil {
//			t.Fatal(err)
//		}
//		t.Cleanup(pool.Close) // runs before the database is dropped
//		...
//	}
//
// Fault tests that stop and restart the server use a private server of
// their own (package pgserver, which also starts the local one here), never
// the shared one.
package pgtest
