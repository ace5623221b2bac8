package pgqueue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pgqueue/pgqueue"
)

// Start refuses a schema older than the client needs, instead of running
// queries that fail on missing columns in a loop.
func TestStartRefusesOutdatedSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	mg, err := pgqueue.NewMigrator(ctx, pool, "")
	must(t, err)
	defer mg.Close()
	if _, err := mg.Down(ctx, 1); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, pool, nil)
	if err := c.Start(ctx); !errors.Is(err, pgqueue.ErrSchemaOutdated) {
		t.Fatalf("Start on a schema one version behind: %v", err)
	}
	if _, err := mg.Up(ctx); err != nil {
		t.Fatal(err)
	}
	must(t, c.Start(ctx))
	must(t, c.Stop(ctx))

	// A schema never migrated is outdated too.
	other := newClient(t, pool, &pgqueue.Config{Schema: "never_migrated"})
	if err := other.Start(ctx); !errors.Is(err, pgqueue.ErrSchemaOutdated) {
		t.Fatalf("Start on a schema never migrated: %v", err)
	}
}
