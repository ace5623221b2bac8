package pgqueue

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// claimer runs sql/claim.sql, which decides which jobs a claim takes and
// in what order.
type claimer struct {
	pool *pgxpool.Pool
	q    *queries
	// base is not the fetch context: a claim cancelled in flight may still
	// commit, and its rows would then wait for their lease with no one
	// working them.
	base     context.Context
	jobLease time.Duration
	clientID string
	obs      *Observer    // nil for none
	schema   *schemaWatch // nil for none
}

// claim takes up to limit available jobs of queue, each with a new fence
// and a lease of jobLease.
func (c *claimer) claim(queue string, limit int) ([]*JobRow, error) {
	if err := c.schema.blocked(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(c.base, writeTimeout)
	defer cancel()
	rows, err := c.pool.Query(ctx, c.q.claim, queue, limit, c.jobLease.Microseconds(), c.clientID)
	if err != nil {
		return nil, c.schema.observe(ctx, dbError("claim "+queue, err))
	}
	jobs, err := collectJobRows(rows)
	if err != nil {
		return nil, c.schema.observe(ctx, dbError("claim "+queue, err))
	}
	_ = c.schema.observe(ctx, nil)
	if c.obs != nil && c.obs.Claimed != nil && len(jobs) > 0 {
		c.obs.Claimed(queue, len(jobs))
	}
	return jobs, nil
}
