package pgqueue_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/internal/testdb"
)

func TestMain(m *testing.M) { os.Exit(testdb.Main(m)) }

// newPool returns a pool on a fresh database of the test's own, closed when
// the test ends.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	connString := pgtest.DB().NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
