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
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/internal/sqlschema"
)

// Main runs the tests of m and returns the exit code for os.Exit: 1 also
// when they passed but left goroutines running. migrate is pgqueue.Migrate,
// passed in by the test package so that this package need not import the
// root (whose Migrate returns a type of its own, hence R).
func Main[R any](m *testing.M, migrate func(ctx context.Context, pool *pgxpool.Pool, schema string) (R, error)) int {
	code := pgtest.Main(m, func(ctx context.Context, connString string) error {
		return migrateTemplate(ctx, connString, func(ctx context.Context, pool *pgxpool.Pool) error {
			_, err := migrate(ctx, pool, sqlschema.Default)
			return err
		})
	})
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
func migrateTemplate(ctx context.Context, connString string, migrate func(context.Context, *pgxpool.Pool) error) error {
	pool, err := pgxpool.New(ctx, connString)
	if err != nil {
		return err
	}
	defer pool.Close()
	return migrate(ctx, pool)
}

// ExamplePool gives an Example function a migrated database of its own,
// cloned from the template like a test's (an example has no testing.TB to
// clean up after it), and a function that closes the pool and drops the
// database. prefix starts the database's name. It panics on failure, as an
// example has no other way to fail.
func ExamplePool(prefix string) (*pgxpool.Pool, func()) {
	ctx := context.Background()
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	ident := pgx.Identifier{name}.Sanitize()
	adminExec := func(sql string) {
		admin, err := pgx.Connect(ctx, pgtest.Shared().AdminConnString())
		if err != nil {
			panic(err)
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, sql); err != nil {
			panic(err)
		}
	}
	adminExec("CREATE DATABASE " + ident + " TEMPLATE " + pgx.Identifier{pgtest.DB().Name()}.Sanitize())
	pool, err := pgxpool.New(ctx, pgtest.Shared().ConnString(name))
	if err != nil {
		panic(err)
	}
	return pool, func() {
		pool.Close()
		adminExec("DROP DATABASE " + ident + " WITH (FORCE)")
	}
}
