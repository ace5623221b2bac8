package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/sqlschema"
)

// activeClients lists the processes working schema now (see
// sql/active_clients.sql), one per client ID, as "ID (leader, 2 running
// jobs)": none when the schema has no leases table yet (before migration
// 3) or no tables.
func activeClients(ctx context.Context, pool *pgxpool.Pool, schema string) ([]string, error) {
	var ready, q string
	if err := sqlschema.Load(sqlFiles, "sql", schema, map[string]*string{"active_clients_ready": &ready, "active_clients": &q}); err != nil {
		return nil, err
	}
	// The statement names both tables: run it only when both exist.
	var exist bool
	err := pool.QueryRow(ctx, ready, sqlschema.Quote(schema)+".leases", sqlschema.Quote(schema)+".jobs").Scan(&exist)
	if err != nil || !exist {
		return nil, err
	}
	rows, err := pool.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var (
			id     string
			leader bool
			jobs   int64
		)
		if err := row.Scan(&id, &leader, &jobs); err != nil {
			return "", err
		}
		var what []string
		if leader {
			what = append(what, "leader")
		}
		switch {
		case jobs == 1:
			what = append(what, "1 running job")
		case jobs > 1:
			what = append(what, fmt.Sprintf("%d running jobs", jobs))
		}
		return id + " (" + strings.Join(what, ", ") + ")", nil
	})
}

// refuseWhileActive refuses a migrate down while clients work the schema:
// a client running against an older schema fails on every statement.
func refuseWhileActive(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	active, err := activeClients(ctx, pool, schema)
	if err != nil {
		return fmt.Errorf("migrate down: look for active clients: %w", err)
	}
	if n := len(active); n > 0 {
		procs := "1 process works"
		if n > 1 {
			procs = fmt.Sprintf("%d processes work", n)
		}
		return fmt.Errorf("migrate down: refused: %s schema %s now (%s); stop them first, or pass --ignore-active", procs, schema, strings.Join(active, "; "))
	}
	return nil
}
