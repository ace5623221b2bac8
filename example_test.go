package pgqueue_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testdb"
)

// exampleDB gives an example a migrated database of its own and a
// function that drops it.
func exampleDB() (*pgxpool.Pool, func()) { return testdb.ExamplePool("pgqueue_example") }

type SendEmailArgs struct {
	To string `json:"to"`
}

func (SendEmailArgs) Kind() string { return "send_email" }

// Enqueue a job and work it: the main flow.
func Example() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()

	if _, err := pgqueue.Migrate(ctx, pool, pgqueue.SchemaDefault); err != nil { // nothing to do here: already migrated
		panic(err)
	}
	sent := make(chan string, 1)
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[SendEmailArgs]) error {
		sent <- job.Args.To
		return nil
	}, nil); err != nil {
		panic(err)
	}
	client, err := pgqueue.New(pool, &pgqueue.Config{
		Workers: workers,
		Queues:  map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 10}},
	})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	if _, err := client.Enqueue(ctx, SendEmailArgs{To: "ada@example.com"}, nil); err != nil {
		panic(err)
	}
	fmt.Println("sent to", <-sent)
	// Output: sent to ada@example.com
}

// A job enqueued in your transaction exists only if it commits.
func ExampleClient_EnqueueTx() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()
	client, err := pgqueue.New(pool, nil)
	if err != nil {
		panic(err)
	}

	for _, commit := range []bool{false, true} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			panic(err)
		}
		// ... the business write goes here, in tx ...
		if _, err := client.EnqueueTx(ctx, tx, SendEmailArgs{To: "grace@example.com"}, nil); err != nil {
			panic(err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			panic(err)
		}
		var jobs int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM pgqueue.jobs").Scan(&jobs); err != nil {
			panic(err)
		}
		fmt.Printf("commit=%v: %d job(s)\n", commit, jobs)
	}
	// Output:
	// commit=false: 0 job(s)
	// commit=true: 1 job(s)
}

// A handler commits its database effect and the job's completion together.
func ExampleClient_CompleteTx() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()
	if _, err := pool.Exec(ctx, "CREATE TABLE outbox (job_id bigint, recipient text)"); err != nil {
		panic(err)
	}

	done := make(chan struct{})
	workers := pgqueue.NewWorkers()
	var client *pgqueue.Client
	if err := pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[SendEmailArgs]) error {
		defer close(done)
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "INSERT INTO outbox VALUES ($1, $2)", job.ID, job.Args.To); err != nil {
			return err
		}
		// ErrJobLeaseLost here means another worker took the job over: the
		// rollback undoes the insert.
		if err := client.CompleteTx(ctx, tx, job.JobRow); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}, nil); err != nil {
		panic(err)
	}
	client, err := pgqueue.New(pool, &pgqueue.Config{Workers: workers, Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 1}}})
	if err != nil {
		panic(err)
	}
	if _, err := client.Enqueue(ctx, SendEmailArgs{To: "linus@example.com"}, nil); err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	<-done
	if err := client.Stop(ctx); err != nil {
		panic(err)
	}
	var state, recipient string
	if err := pool.QueryRow(ctx, "SELECT j.state, o.recipient FROM pgqueue.jobs j JOIN outbox o ON o.job_id = j.id").Scan(&state, &recipient); err != nil {
		panic(err)
	}
	fmt.Println(state, recipient)
	// Output: completed linus@example.com
}
