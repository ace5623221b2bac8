package pgqueue_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue"
)

// Migrations hold session advisory locks (golang-migrate's and pgqueue's
// own), which PgBouncer in transaction mode would leave held on a backend
// it shares: through it Migrate refuses whenever there is something to
// migrate, leaves no lock and creates nothing, while Migrate on a current
// schema, which only reads the version, works.
func TestMigrateThroughPgBouncer(t *testing.T) {
	t.Parallel()
	direct, pooled := throughPgBouncer(t)
	pool := poolWithMode(t, pooled, pgx.QueryExecModeExec)
	ctx := t.Context()

	res, err := pgqueue.Migrate(ctx, pool, pgqueue.SchemaDefault)
	must(t, err)
	if res.Changed() {
		t.Fatalf("current schema through the pooler: %+v, want no change", res)
	}

	_, err = pgqueue.Migrate(ctx, pool, "other")
	if !errors.Is(err, pgqueue.ErrMigrateThroughPooler) {
		t.Fatalf("Migrate of a new schema through PgBouncer: %v, want ErrMigrateThroughPooler", err)
	}
	if _, err := pgqueue.NewMigrator(ctx, pool, pgqueue.SchemaDefault); !errors.Is(err, pgqueue.ErrMigrateThroughPooler) {
		t.Fatalf("NewMigrator through PgBouncer: %v, want ErrMigrateThroughPooler", err)
	}

	directPool := poolWithMode(t, direct, pgx.QueryExecModeCacheStatement)
	var schemas, locks int
	must(t, directPool.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = 'other'").Scan(&schemas))
	must(t, directPool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&locks))
	if schemas != 0 || locks != 0 {
		t.Fatalf("after the refusal: %d schemas named other, %d advisory locks held; want none", schemas, locks)
	}

	res, err = pgqueue.Migrate(ctx, directPool, "other")
	must(t, err)
	if !res.Changed() {
		t.Fatalf("direct Migrate of a new schema: %+v, want a change", res)
	}
}
