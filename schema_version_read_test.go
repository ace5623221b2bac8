package pgqueue_test

import (
	"testing"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/internal/schemaversion"
)

// schemaversion.Read understands the version table the Migrator
// (golang-migrate) writes, at every step: created and empty, migrated up,
// one down, dirty. It lives here rather than in schemaversion's tests,
// which would otherwise import this package.
func TestSchemaVersionReadsMigratorTable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.DB().NewPool(t)
	read := func() schemaversion.Version {
		t.Helper()
		v, err := schemaversion.Read(ctx, pool, "sv")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	latest := schemaversion.Latest()
	mg, err := pgqueue.NewMigrator(ctx, pool, "sv")
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	// The Migrator created the schema and its table, nothing applied yet.
	if v := read(); v != (schemaversion.Version{Migrated: true}) {
		t.Errorf("before up: %+v", v)
	}
	if _, err := mg.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if v := read(); v != (schemaversion.Version{Migrated: true, Version: latest}) {
		t.Errorf("after up: %+v", v)
	}
	if _, err := mg.Down(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if v := read(); v.Version != latest-1 || v.Dirty {
		t.Errorf("after down 1: %+v", v)
	}
	if _, err := pool.Exec(ctx, `UPDATE sv.schema_migrations SET dirty = true`); err != nil {
		t.Fatal(err)
	}
	if v := read(); v.Version != latest-1 || !v.Dirty {
		t.Errorf("dirty: %+v", v)
	}
}
