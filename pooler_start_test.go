package pgqueue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgbouncer"
	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/internal/testlog"
)

// Processes that start with pgx's default exec mode through PgBouncer in
// transaction mode all get ErrPoolerExecMode, from Start and from
// Migrate, one after the other, and whatever state the schema is in: the
// check runs before any statement in that mode. Each start is a new pool, as a new process would have,
// and PgBouncer's one server connection is shared by all of them, so a
// named statement one start left behind is there for the next.
func TestPgBouncerExecModeRefusedEveryTime(t *testing.T) {
	t.Parallel()
	direct := pgtest.DB().NewDatabase(t)
	cfg, err := pgx.ParseConfig(direct)
	must(t, err)
	pooled := pgbouncer.Require(t, direct, &pgbouncer.Options{PoolSize: 1}).ConnString(cfg.Database)

	for _, schema := range []string{pgqueue.SchemaDefault, "unmigrated"} {
		t.Run(schema, func(t *testing.T) {
			for i := range 4 {
				pcfg, err := pgxpool.ParseConfig(pooled) // pgx's default: cache_statement
				must(t, err)
				pcfg.MaxConns = 1
				pool, err := pgxpool.NewWithConfig(t.Context(), pcfg)
				must(t, err)
				c := newClient(t, pool, &pgqueue.Config{Schema: schema, Workers: pgqueue.NewWorkers(), Logger: testlog.Discard()})
				err = c.Start(t.Context())
				if err == nil {
					_ = c.Stop(context.WithoutCancel(t.Context()))
				}
				// What a program does first at start-up.
				_, migrateErr := pgqueue.Migrate(t.Context(), pool, schema)
				pool.Close()
				if !errors.Is(err, pgqueue.ErrPoolerExecMode) {
					t.Fatalf("start %d on schema %s through PgBouncer in cache_statement mode: %v, want ErrPoolerExecMode", i+1, schema, err)
				}
				if !errors.Is(migrateErr, pgqueue.ErrPoolerExecMode) {
					t.Fatalf("Migrate %d on schema %s through PgBouncer in cache_statement mode: %v, want ErrPoolerExecMode", i+1, schema, migrateErr)
				}
			}
		})
	}
}
