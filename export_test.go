package pgqueue

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SetBeforeRescueWrite installs a hook that runs between the rescuer's read
// of expired jobs and its conditional write.
func SetBeforeRescueWrite(c *Client, f func(ids []int64)) { c.testHooks.beforeRescueWrite = f }

// SetFinishQuery replaces the query that records job results.
func SetFinishQuery(c *Client, f func(ctx context.Context, query string, args ...any) (pgx.Rows, error)) {
	c.testHooks.finishQuery = f
}

// Pool returns the client's pool.
func Pool(c *Client) interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
} {
	return c.pool
}
