package schemaversion_test

import (
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/internal/schemaversion"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, nil)) }

func TestRead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, pgtest.DB().NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
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
	mg, err := pgqueue.NewMigrator(ctx, pool, "sv")
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	// The Migrator created the schema and its table, nothing applied yet.
	if v := read("sv"); v != (schemaversion.Version{Migrated: true}) {
		t.Errorf("before up: %+v", v)
	}
	if _, err := mg.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if v := read("sv"); v != (schemaversion.Version{Migrated: true, Version: latest}) {
		t.Errorf("after up: %+v", v)
	}
	if _, err := mg.Down(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if v := read("sv"); v.Version != latest-1 || v.Dirty {
		t.Errorf("after down 1: %+v", v)
	}
	if _, err := pool.Exec(ctx, `UPDATE sv.schema_migrations SET dirty = true`); err != nil {
		t.Fatal(err)
	}
	if v := read("sv"); v.Version != latest-1 || !v.Dirty {
		t.Errorf("dirty: %+v", v)
	}
}
