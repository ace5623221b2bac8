package pgqueue_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/jobsql"
)

// Every statement of the client that reads jobs and another table of the
// schema locks jobs first, as the migrations down do (they take jobs, then
// alter queues): a statement that held queues while waiting for jobs
// deadlocked with a migration, and PostgreSQL failed one of the two (seen
// as "migrate down: deadlock detected" while a client polled). PostgreSQL
// takes a statement's locks when it parses it and again, in the order of
// its range table, at each later execution of the prepared statement, so
// both are checked: a fresh connection's first execution, and the seventh
// (past the plan cache's five custom plans).
func TestStatementsLockJobsFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	q, err := jobsql.Load(pgqueue.SchemaDefault)
	must(t, err)
	for _, st := range []struct {
		name string
		sql  string
		args []any
	}{
		{"poll", q.Poll, []any{[]string{pgqueue.QueueDefault}, "pgqueue:leader"}},
		{"claim", q.Claim, []any{pgqueue.QueueDefault, 10, int64(60e6), "worker"}},
		{"claim_flow", q.ClaimFlow, []any{pgqueue.QueueDefault, 10, int64(60e6), "worker"}},
		{"queue_held", q.QueueHeld, []any{pgqueue.QueueDefault}},
		{"queue_list", q.QueueList, nil},
	} {
		for _, executions := range []int{0, 6} {
			name := st.name + "/first"
			if executions > 0 {
				name = st.name + "/cached"
			}
			t.Run(name, func(t *testing.T) {
				conn, err := pool.Acquire(ctx)
				must(t, err)
				defer conn.Release()
				run := func() error {
					rows, err := conn.Query(ctx, st.sql, st.args...)
					if err != nil {
						return err
					}
					rows.Close()
					return rows.Err()
				}
				for i := 0; i < executions; i++ {
					must(t, run())
				}
				pid := conn.Conn().PgConn().PID()

				// A migration down, halfway: jobs locked, queues next.
				migration, err := pool.Begin(ctx)
				must(t, err)
				defer func() { _ = migration.Rollback(ctx) }()
				_, err = migration.Exec(ctx, "LOCK TABLE pgqueue.jobs IN ACCESS EXCLUSIVE MODE")
				must(t, err)

				done := make(chan error, 1)
				go func() { done <- run() }()
				waitFor(t, "the statement to wait for a lock", func() bool {
					var waiting bool
					must(t, pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted)", pid).Scan(&waiting))
					return waiting
				})
				var waitsFor string
				var holds []string
				must(t, pool.QueryRow(ctx, `SELECT relation::regclass::text FROM pg_locks
					WHERE pid = $1 AND NOT granted AND locktype = 'relation'`, pid).Scan(&waitsFor))
				rows, err := pool.Query(ctx, `SELECT relation::regclass::text FROM pg_locks
					WHERE pid = $1 AND granted AND locktype = 'relation'
					  AND relation::regclass::text LIKE 'pgqueue.%'`, pid)
				must(t, err)
				holds, err = pgx.CollectRows(rows, pgx.RowTo[string])
				must(t, err)
				if waitsFor != "pgqueue.jobs" || len(holds) > 0 {
					t.Errorf("waits for %s holding %v; want it to wait for pgqueue.jobs holding nothing of the schema", waitsFor, holds)
				}
				// What the migration does next: with the statement holding
				// queues, one of the two would fail as a deadlock.
				_, err = migration.Exec(ctx, "LOCK TABLE pgqueue.queues IN ACCESS EXCLUSIVE MODE")
				must(t, err)
				must(t, migration.Rollback(ctx))
				must(t, <-done)
			})
		}
	}
}
