package pgqueue_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/pgtest"
)

// Tests that need several processes start the test binary again with
// childEnv naming the part to run and childDBEnv the database; TestMain
// then runs that part instead of the tests.
const (
	childEnv   = "PGQUEUE_TEST_CHILD"
	childDBEnv = "PGQUEUE_TEST_CHILD_DB"
)

// children are the parts a child process can run.
var children = map[string]func(ctx context.Context, pool *pgxpool.Pool) error{
	"unique":       uniqueChild,
	"cancelholder": cancelHolderChild,
}

// runChild runs the child part named in the environment, if any, and
// returns its exit code; ok is false in the test process itself.
func runChild() (code int, ok bool) {
	name := os.Getenv(childEnv)
	if name == "" {
		return 0, false
	}
	run := children[name]
	if run == nil {
		fmt.Fprintf(os.Stderr, "unknown child %q\n", name)
		return 2, true
	}
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(os.Getenv(childDBEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1, true
	}
	// The parent sizes the pool (pool_max_conns): its children share
	// its test's connections.
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1, true
	}
	defer pool.Close()
	if err := run(ctx, pool); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1, true
	}
	return 0, true
}

// childConnString is pool's connection string for one of procs child
// processes of a test, with the pool size (pool_max_conns) that keeps the
// test within its share of connections, the parent's pool counted as one.
func childConnString(t testing.TB, pool *pgxpool.Pool, procs int) string {
	t.Helper()
	conns := max(2, pgtest.TestConns()/(procs+1))
	u, err := url.Parse(pool.Config().ConnString())
	if err != nil || u.Scheme == "" {
		t.Fatalf("child connection string: want a URL, have %q", pool.Config().ConnString())
	}
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(conns))
	u.RawQuery = q.Encode()
	return u.String()
}
