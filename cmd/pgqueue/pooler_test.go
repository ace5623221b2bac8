package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgbouncer"
	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/internal/schemaversion"
)

// Through PgBouncer in transaction mode, with a plain URL, every command
// works run after run: each run is a new session on the one server
// connection the pooler shares, where a named statement an earlier run
// prepared would still sit. migrate up on a current schema exits 0, as
// the library's Migrate does. A URL that names an exec mode needing its
// own session is refused at once, with the fix in the message.
func TestCLIThroughPgBouncer(t *testing.T) {
	t.Parallel()
	direct := pgtest.DB().NewDatabase(t)
	cfg, err := pgx.ParseConfig(direct)
	must(t, err)
	pool, err := pgxpool.New(t.Context(), direct)
	must(t, err)
	t.Cleanup(pool.Close)
	if _, err := pgqueue.Migrate(t.Context(), pool, pgqueue.SchemaDefault); err != nil {
		t.Fatal(err)
	}
	pooled := pgbouncer.Require(t, direct, &pgbouncer.Options{PoolSize: 1}).ConnString(cfg.Database)
	db := []string{"--database-url", pooled}

	for range 2 {
		out := cli(t, exitOK, append([]string{"migrate", "up"}, db...)...)
		contains(t, out, "nothing to do")
	}
	for i := range int64(3) {
		contains(t, cli(t, exitOK, append([]string{"enqueue", "pooled", `{"n":1}`}, db...)...), "enqueued job "+id(i+1))
		contains(t, cli(t, exitOK, append([]string{"jobs", "list"}, db...)...), "pooled")
		contains(t, cli(t, exitOK, append([]string{"jobs", "get", id(i + 1)}, db...)...), "pooled")
		contains(t, cli(t, exitOK, append([]string{"queues", "list"}, db...)...), "default")
		cli(t, exitOK, append([]string{"stats"}, db...)...)
		contains(t, cli(t, exitOK, append([]string{"migrate", "version"}, db...)...), fmt.Sprint(schemaversion.Latest()))
	}

	for _, mode := range []string{"cache_statement", "describe_exec"} {
		code, stdout, stderr := runCLI(t.Context(), "jobs", "list", "--database-url", withExecMode(t, pooled, mode))
		if code != exitError || !strings.Contains(stderr, pgqueue.ErrPoolerExecMode.Error()) || !strings.Contains(stderr, "remove default_query_exec_mode") {
			t.Errorf("jobs list through PgBouncer with %s: exit %d, stdout %q, stderr %q; want exit %d and ErrPoolerExecMode with the fix", mode, code, stdout, stderr, exitError)
		}
	}
	// Direct, the same URL parameter is the user's choice and works.
	cli(t, exitOK, "jobs", "list", "--database-url", withExecMode(t, direct, "cache_statement"))
}

// openPool refuses an exec mode that needs its own session through a
// pooler with pgqueue.ErrPoolerExecMode, which a program can test for.
func TestOpenPoolRefusalIsTyped(t *testing.T) {
	t.Parallel()
	direct := pgtest.DB().NewDatabase(t)
	cfg, err := pgx.ParseConfig(direct)
	must(t, err)
	pooled := pgbouncer.Require(t, direct, nil).ConnString(cfg.Database)
	_, err = openPool(t.Context(), withExecMode(t, pooled, "cache_statement"))
	if !errors.Is(err, pgqueue.ErrPoolerExecMode) {
		t.Fatalf("openPool through PgBouncer in cache_statement mode: %v, want ErrPoolerExecMode", err)
	}
}

// withExecMode returns the connection URL u with default_query_exec_mode
// set to mode, whether or not u has parameters already (a DATABASE_URL
// given by the user may have none).
func withExecMode(t *testing.T, u, mode string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatalf("connection URL %q: %v", u, err)
	}
	q := parsed.Query()
	q.Set("default_query_exec_mode", mode)
	parsed.RawQuery = q.Encode()
	return parsed.String()
}
