// Package testdb is the TestMain of test packages whose every test
// database needs pgqueue's schema: one template database per test binary,
// migrated once (see internal/pgtest), and a goroutine leak check after a
// passing run.
package testdb

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

// Main runs the tests of m and returns the exit code for os.Exit: 1 also
// when they passed but left goroutines running.
func Main(m *testing.M) int {
	code := pgtest.Main(m, migrateTemplate)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	return code
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
