package pgqueue_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// Behind PgBouncer in transaction mode: the pool goes through the pooler
// in a mode that keeps no prepared statement between round trips, and
// Config.DirectConnConfig reaches PostgreSQL itself for LISTEN and session
// locks. Here both reach the same server, as a stand-in for
//
//	pool:   postgres://app@pgbouncer:6432/app?default_query_exec_mode=cache_describe
//	direct: postgres://app@postgres:5432/app
func Example_connectionPooler() {
	ctx := context.Background()
	db, drop := exampleDB()
	defer drop()

	poolCfg := db.Config().Copy()
	poolCfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	direct := db.Config().ConnConfig.Copy()

	done := make(chan string, 1)
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[SendEmailArgs]) error {
		done <- job.Args.To
		return nil
	}, nil); err != nil {
		panic(err)
	}
	client, err := pgqueue.New(pool, &pgqueue.Config{
		Workers:          workers,
		Queues:           map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 2}},
		DirectConnConfig: direct,
	})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	if _, err := client.Enqueue(ctx, SendEmailArgs{To: "ada@example.com"}, nil); err != nil {
		panic(err)
	}
	fmt.Println("sent to", <-done)
	stop, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := client.Stop(stop); err != nil {
		panic(err)
	}
	// Output: sent to ada@example.com
}
