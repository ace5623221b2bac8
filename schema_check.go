package pgqueue

import (
	"context"
	"fmt"

	"github.com/pgqueue/pgqueue/internal/schemaversion"
)

// checkSchema refuses to start on a schema older than this binary's
// migrations (ErrSchemaOutdated): its queries would fail on missing
// columns and tables in a loop. A newer schema is accepted: migrations
// add, so an older binary keeps working during a rolling deploy.
func (c *Client) checkSchema(ctx context.Context) error {
	v, err := schemaversion.Read(ctx, c.pool, c.config.Schema)
	if err != nil {
		return dbError("start", err)
	}
	need := schemaversion.Latest()
	switch {
	case !v.Migrated:
		return fmt.Errorf("start: schema %q has no migrations applied, this client needs version %d (run pgqueue.Migrate or pgqueue migrate up): %w", c.config.Schema, need, ErrSchemaOutdated)
	case v.Dirty:
		return fmt.Errorf("start: schema %q is dirty at version %d: a migration failed half-way (repair it, then pgqueue migrate force): %w", c.config.Schema, v.Version, ErrSchemaOutdated)
	case v.Version < need:
		return fmt.Errorf("start: schema %q is at version %d, this client needs %d (run pgqueue.Migrate or pgqueue migrate up): %w", c.config.Schema, v.Version, need, ErrSchemaOutdated)
	}
	return nil
}
