package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := Main(m, func(ctx context.Context, connString string) error {
		conn, err := pgx.Connect(ctx, connString)
		if err != nil {
			return err
		}
		_, err = conn.Exec(ctx, `CREATE TABLE items (id bigint PRIMARY KEY, note text NOT NULL)`)
		return errors.Join(err, conn.Close(ctx))
	})
	// Main has stopped the server: every goroutine pgtest started must be gone.
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// connect opens a connection closed when the test ends.
func connect(tb testing.TB, connString string) *pgx.Conn {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// databaseExists asks the shared server's catalogue about name.
func databaseExists(tb testing.TB, name string) bool {
	tb.Helper()
	return databaseOn(tb, connect(tb, Shared().AdminConnString()), name)
}

// databaseOn asks the catalogue of conn's server about name.
func databaseOn(tb testing.TB, conn *pgx.Conn, name string) bool {
	tb.Helper()
	var exists bool
	err := conn.QueryRow(tb.Context(),
		`SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&exists)
	if err != nil {
		tb.Fatalf("query pg_database: %v", err)
	}
	return exists
}
