package pgqueue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pgqueue/pgqueue"
)

func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("NothingToDoIsAResult", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		res, err := pgqueue.Migrate(ctx, pool, pgqueue.SchemaDefault)
		must(t, err)
		if res.Changed() || res.To == 0 {
			t.Fatalf("result %+v, want unchanged at the latest version", res)
		}
	})

	t.Run("UpDownUpInCustomSchema", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "migrations up, down and up again in a custom schema")
		pool := newPool(t)
		mg, err := pgqueue.NewMigrator(ctx, pool, "jobs_custom")
		must(t, err)
		defer mg.Close()

		up, err := mg.Up(ctx)
		must(t, err)
		if up.From != 0 || up.To == 0 {
			t.Fatalf("first up %+v", up)
		}
		down, err := mg.Down(ctx, 0)
		must(t, err)
		if down.From != up.To || down.To != 0 {
			t.Fatalf("down %+v", down)
		}
		var tables int
		must(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'jobs_custom' AND tablename = 'jobs'").Scan(&tables))
		if tables != 0 {
			t.Fatal("jobs table left after down")
		}
		again, err := mg.Up(ctx)
		must(t, err)
		if again != up {
			t.Fatalf("second up %+v, want %+v", again, up)
		}
		v, dirty, err := mg.Version(ctx)
		must(t, err)
		if v != up.To || dirty {
			t.Fatalf("version %d dirty %v", v, dirty)
		}

		// The custom schema works end to end and is separate from the
		// default one.
		c := newClient(t, pool, &pgqueue.Config{Schema: "jobs_custom"})
		row, err := c.Enqueue(ctx, emailArgs{To: "x"}, nil)
		must(t, err)
		var n int
		must(t, pool.QueryRow(ctx, "SELECT count(*) FROM jobs_custom.jobs WHERE id = $1", row.ID).Scan(&n))
		if n != 1 || countJobs(t, pool, "true") != 0 {
			t.Fatal("job not in the custom schema alone")
		}
	})

	t.Run("ForceClearsDirty", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "Migrate's force clearing a dirty schema version")
		pool := newPool(t)
		mg, err := pgqueue.NewMigrator(ctx, pool, "forced")
		must(t, err)
		defer mg.Close()
		_, err = mg.Up(ctx)
		must(t, err)
		_, err = pool.Exec(ctx, `UPDATE forced.schema_migrations SET dirty = true`)
		must(t, err)
		_, dirty, err := mg.Version(ctx)
		must(t, err)
		if !dirty {
			t.Fatal("not dirty")
		}
		if _, err := mg.Up(ctx); err == nil {
			t.Fatal("up on a dirty database succeeded")
		}
		must(t, mg.Force(ctx, 1))
		_, dirty, err = mg.Version(ctx)
		must(t, err)
		if dirty {
			t.Fatal("still dirty after force")
		}
	})

	t.Run("RejectsBadSchema", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		if _, err := pgqueue.Migrate(ctx, pool, `public"; DROP TABLE x; --`); !errors.Is(err, pgqueue.ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
		if _, err := pgqueue.Migrate(ctx, nil, pgqueue.SchemaDefault); !errors.Is(err, pgqueue.ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
	})
}
