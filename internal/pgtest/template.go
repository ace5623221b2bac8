package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	templatePrefix = "pgqueue_tmpl_"
	databasePrefix = "pgqueue_test_"

	// createAttempts and createBackoff bound the retries of CREATE DATABASE
	// while the template is briefly in use (SQLSTATE 55006).
	createAttempts = 10
	createBackoff  = 50 * time.Millisecond
	// dropTimeout bounds dropping a test's database in its cleanup.
	dropTimeout = 30 * time.Second
)

// Template is a migrated template database; each test gets a fresh clone of
// it from NewDatabase.
type Template struct {
	server *Server
	name   string

	once sync.Once
	h    *harness // started by the first NewDatabase
}

// NewTemplate creates a uniquely named template database on s, calls setup
// with its connection string (the caller migrates it there; nil setup
// leaves it empty), then marks it as a template that accepts no
// connections and ends any connection setup left open, because CREATE
// DATABASE refuses to copy a database that is in use.
func NewTemplate(ctx context.Context, s *Server, setup func(ctx context.Context, connString string) error) (*Template, error) {
	t := &Template{server: s, name: randomName(templatePrefix)}
	conn, err := pgx.Connect(ctx, s.AdminConnString())
	if err != nil {
		return nil, fmt.Errorf("pgtest: new template: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	// template0 rather than the default template1: nobody can be connected
	// to template0, on a shared server someone may be connected to template1.
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+t.ident()+" TEMPLATE template0"); err != nil {
		return nil, fmt.Errorf("pgtest: create template database: %w", err)
	}
	fail := func(err error) (*Template, error) {
		_ = t.drop(context.WithoutCancel(ctx), conn)
		return nil, err
	}
	if setup != nil {
		if err := setup(ctx, s.ConnString(t.name)); err != nil {
			return fail(fmt.Errorf("pgtest: template setup: %w", err))
		}
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+t.ident()+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return fail(fmt.Errorf("pgtest: mark template: %w", err))
	}
	_, err = conn.Exec(ctx,
		`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`,
		t.name)
	if err != nil {
		return fail(fmt.Errorf("pgtest: end connections to template: %w", err))
	}
	return t, nil
}

// Name returns the template database's name.
func (t *Template) Name() string { return t.name }

// NewDatabase returns the connection string of a database cloned from the
// template for the test tb, dropped (even if still in use) after the test
// and its subtests end. It ends the test on failure. It is safe for
// parallel tests.
//
// The clone was made ahead of time: a few goroutines keep some clones
// ready, and the drop happens in the background after the test, so
// neither waits in a test's time. Close drops what is left.
func (t *Template) NewDatabase(tb testing.TB) string {
	tb.Helper()
	t.once.Do(t.start)
	name, err := t.h.take(tb.Context())
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	// Registered first, so it runs after the test's own cleanups (its
	// pools closed) and its subtests.
	tb.Cleanup(func() {
		if err := t.h.dropLater(name); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return t.server.ConnString(name)
}

// NewPool returns a pool on a database of NewDatabase, closed when the
// test ends (before the database is dropped).
func (t *Template) NewPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(tb.Context(), t.NewDatabase(tb))
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// Close drops the databases made ahead, waits for the drops of the tests'
// databases, and drops the template database. No test may call
// NewDatabase after.
func (t *Template) Close(ctx context.Context) error {
	t.once.Do(func() {}) // no harness from now on
	if t.h != nil {
		if err := t.h.close(ctx); err != nil {
			return err
		}
	}
	conn, err := pgx.Connect(ctx, t.server.AdminConnString())
	if err != nil {
		return fmt.Errorf("pgtest: drop template: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return t.drop(ctx, conn)
}

func (t *Template) drop(ctx context.Context, conn *pgx.Conn) error {
	// A template database cannot be dropped.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+t.ident()+" WITH IS_TEMPLATE false"); err != nil {
		return fmt.Errorf("pgtest: drop template: %w", err)
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+t.ident()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("pgtest: drop template: %w", err)
	}
	return nil
}

func (t *Template) ident() string { return pgx.Identifier{t.name}.Sanitize() }

// isObjectInUse reports SQLSTATE 55006, which CREATE DATABASE returns when
// another session is connected to the template.
func isObjectInUse(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55006"
}

// randomName returns prefix followed by 16 random hex digits: a valid,
// lower case identifier that no concurrent test process will repeat.
func randomName(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}
