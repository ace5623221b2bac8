package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgsession"
)

// execModeParam is the connection string parameter that names pgx's query
// exec mode.
const execModeParam = "default_query_exec_mode"

// openPool opens a pool on connString for a command. A connection string
// that names no exec mode gets cache_describe rather than pgx's default,
// cache_statement: it keeps no named statement on the server, so the
// command works the same direct and through a pooler in transaction mode,
// where a named statement from an earlier run may still sit on the shared
// backend (42P05). One that names cache_statement or describe_exec is
// checked at once, and refused through a pooler with the fix in the
// message, rather than failing on some later statement.
func openPool(ctx context.Context, connString string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	// pgx reads the exec mode from the parsed runtime parameters, so they
	// tell whether the string named one, in a URL or in key=value form.
	raw, err := pgconn.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	named, explicit := raw.RuntimeParams[execModeParam]
	if !explicit {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if explicit && !pgsession.PoolerSafe(cfg.ConnConfig.DefaultQueryExecMode) {
		if err := refuseThroughPooler(ctx, pool, named); err != nil {
			pool.Close()
			return nil, err
		}
	}
	return pool, nil
}

// refuseThroughPooler returns pgqueue.ErrPoolerExecMode when pool's
// connections go through a pooler. Its one statement runs in simple
// protocol, which works in every mode and through every pooler.
func refuseThroughPooler(ctx context.Context, pool *pgxpool.Pool, mode string) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Release()
	err = pgsession.Check(ctx, conn.Conn())
	if errors.Is(err, pgsession.ErrPooled) {
		return fmt.Errorf("connect: %w: the database URL names %s=%s, which keeps statements prepared on one server connection, and the connection goes through a pooler that moves it between server connections; remove %s from the URL (the CLI then uses cache_describe) or set it to cache_describe, exec or simple_protocol",
			pgqueue.ErrPoolerExecMode, execModeParam, mode, execModeParam)
	}
	if err != nil {
		return fmt.Errorf("connect: check connection: %w", err)
	}
	return nil
}
