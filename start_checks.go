package pgqueue

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/pgsession"
	"github.com/pgqueue/pgqueue/internal/schemaversion"
)

// sessionPlan is what Start learnt of the pool's connections: whether
// they go through a pooler, and where notifications come from.
type sessionPlan struct {
	pooled bool
	// listen is what the notifier dials; nil means poll only.
	listen *pgx.ConnConfig
}

// checkPool finds out whether the pool goes through a pooler and, behind
// one, refuses the exec modes that cannot work there. Start runs it
// before any other statement: a statement in such a mode would fail first
// (a named statement another process left on the shared backend: 42P05),
// and hide the real cause behind an error that changes from one start to
// the next.
func (c *Client) checkPool(ctx context.Context) (pooled bool, err error) {
	return checkPoolExecMode(ctx, c.pool, "start")
}

// checkPoolExecMode is checkPool for any caller that is about to run
// statements in the pool's exec mode (Start, Migrate); op prefixes its
// errors. Its own statement is in simple protocol, which every pooler and
// every exec mode pass.
func checkPoolExecMode(ctx context.Context, pool *pgxpool.Pool, op string) (pooled bool, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return false, dbError(op+": connect", err)
	}
	err = pgsession.Check(ctx, conn.Conn())
	conn.Release()
	pooled = errors.Is(err, pgsession.ErrPooled)
	if err != nil && !pooled {
		return false, dbError(op+": check connection", err)
	}
	if mode := pool.Config().ConnConfig.DefaultQueryExecMode; pooled && !pgsession.PoolerSafe(mode) {
		return true, fmt.Errorf("%s: %w: the pool's default_query_exec_mode is %s; use cache_describe, exec or simple_protocol", op, ErrPoolerExecMode, mode)
	}
	return pooled, nil
}

// planSessions checks Config.DirectConnConfig if set, and decides where
// notifications come from, given what checkPool found of the pool.
// Without a direct connection behind a pooler it polls and says so once.
func (c *Client) planSessions(ctx context.Context, pooled bool) (*sessionPlan, error) {
	plan := &sessionPlan{pooled: pooled}
	cfg := c.config
	if cfg.DirectConnConfig != nil {
		// Checked even when nothing listens: session locks use it too.
		direct, err := pgx.ConnectConfig(ctx, cfg.DirectConnConfig.Copy())
		if err != nil {
			return nil, dbError("start: direct connection", err)
		}
		err = pgsession.Check(ctx, direct)
		_ = direct.Close(context.WithoutCancel(ctx))
		if errors.Is(err, pgsession.ErrPooled) {
			return nil, fmt.Errorf("%w Config.DirectConnConfig: goes through a pooler: Config.DirectConnConfig: %w", ErrInvalid, err)
		}
		if err != nil {
			return nil, dbError("start: direct connection", err)
		}
	}
	if len(cfg.Queues) == 0 || cfg.PollOnly {
		return plan, nil
	}
	if cfg.DirectConnConfig != nil {
		plan.listen = cfg.DirectConnConfig.Copy()
		return plan, nil
	}
	if plan.pooled {
		c.log.Warn("pgqueue: the pool goes through a connection pooler, where LISTEN does not work: polling for jobs instead; set Config.DirectConnConfig to a direct connection to get notifications",
			"poll_interval", cfg.FetchPollInterval)
		return plan, nil
	}
	plan.listen = c.pool.Config().ConnConfig.Copy()
	return plan, nil
}

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
