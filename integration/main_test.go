// Package integration tests pgqueue from the outside: built binaries and
// real processes against a real PostgreSQL server.
package integration

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m, migrateTemplate)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// migrateTemplate migrates the default schema of the template database
// every test's database is cloned from.
func migrateTemplate(ctx context.Context, connString string) error {
	pool, err := pgxpool.New(ctx, connString)
	if err != nil {
		return err
	}
	defer pool.Close()
	_, err = pgqueue.Migrate(ctx, pool, "")
	return err
}
