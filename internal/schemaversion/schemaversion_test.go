package schemaversion_test

import (
	"os"
	"testing"

	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/internal/schemaversion"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, nil)) }

func TestRead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.DB().NewPool(t)
	read := func(schema string) schemaversion.Version {
		t.Helper()
		v, err := schemaversion.Read(ctx, pool, schema)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	schemaExists := func(schema string) bool {
		var ok bool
		if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)", schema).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}

	if v := read("nothing_here"); v != (schemaversion.Version{}) || schemaExists("nothing_here") {
		t.Errorf("missing schema: %+v, created %v", v, schemaExists("nothing_here"))
	}
	latest := schemaversion.Latest()
	if latest < 8 {
		t.Fatalf("Latest() = %d, want at least 8 (the migrations of this tree)", latest)
	}
	// What the Migrator writes is read in the root package's
	// TestSchemaVersionReadsMigratorTable: importing the root here would
	// run an import back up the tree.
	if _, err := pool.Exec(ctx, `CREATE SCHEMA sv; CREATE TABLE sv.schema_migrations (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if v := read("sv"); v != (schemaversion.Version{Migrated: true}) {
		t.Errorf("empty version table: %+v", v)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO sv.schema_migrations VALUES ($1, true)`, int64(latest)); err != nil {
		t.Fatal(err)
	}
	if v := read("sv"); v != (schemaversion.Version{Migrated: true, Version: latest, Dirty: true}) {
		t.Errorf("dirty at the latest version: %+v", v)
	}
}
