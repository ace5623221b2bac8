package pgqueuetest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

// Main runs m's tests against a real PostgreSQL server, for TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgqueuetest.Main(m, nil)) }
//
// It obtains a server (DATABASE_URL, else local binaries, else Docker in
// a checkout of pgqueue; see the package doc), migrates pgqueue's default
// schema in a template database and then runs setup on it, if not nil
// (your own tables, another pgqueue schema with pgqueue.Migrate). Every
// database NewPool and NewDatabase return is a clone of that template. It returns the exit code
// for os.Exit; when no server can be had it says why, and how to provide
// one, and returns 1.
func Main(m *testing.M, setup func(ctx context.Context, connString string) error) int {
	return pgtest.Main(m, func(ctx context.Context, connString string) error {
		pool, err := pgxpool.New(ctx, connString)
		if err != nil {
			return err
		}
		_, err = pgqueue.Migrate(ctx, pool, pgqueue.SchemaDefault)
		pool.Close()
		if err != nil || setup == nil {
			return err
		}
		return setup(ctx, connString)
	})
}

// NewDatabase returns the connection string of a new database of the
// test's own, cloned from the template Main built, dropped when the test
// ends (after the cleanups registered later, such as closing a pool). Give
// it to a program under test that connects by itself. It panics when Main
// is not running the test binary.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	return pgtest.DB().NewDatabase(tb)
}

// NewPool returns a pool on a new database of the test's own (see
// NewDatabase), closed when the test ends.
func NewPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), NewDatabase(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}
