package pgqueue_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/pgqueue/pgqueue"
)

type ExportArgs struct {
	Month string `json:"month"`
}

func (ExportArgs) Kind() string { return "export" }

// Cancel a running job: its handler's context ends with ErrJobCancelled,
// and the job ends cancelled instead of being retried.
func ExampleClient_JobCancel() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()

	started, stopped := make(chan int64), make(chan error)
	workers := pgqueue.NewWorkers()
	_ = pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[ExportArgs]) error {
		started <- job.ID
		<-ctx.Done() // a long report, interrupted
		stopped <- context.Cause(ctx)
		return context.Cause(ctx)
	}, nil)
	client, err := pgqueue.New(pool, &pgqueue.Config{
		Workers: workers,
		Queues:  map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 1}},
	})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	row, err := client.Enqueue(ctx, ExportArgs{Month: "2026-11"}, nil)
	if err != nil {
		panic(err)
	}
	<-started
	job, err := client.JobCancel(ctx, row.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println("state after JobCancel:", job.State)
	fmt.Println("handler saw ErrJobCancelled:", errors.Is(<-stopped, pgqueue.ErrJobCancelled))
	// Output:
	// state after JobCancel: running
	// handler saw ErrJobCancelled: true
}

// A handler records its progress and its output; both writes name the
// job's fence, so a worker that lost its claim cannot record.
func ExampleRecordOutput() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()

	done := make(chan error)
	workers := pgqueue.NewWorkers()
	_ = pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[ExportArgs]) error {
		if err := pgqueue.RecordProgress(ctx, map[string]int{"pages": 10, "of": 10}); err != nil {
			return err
		}
		err := pgqueue.RecordOutput(ctx, map[string]string{"url": "/reports/" + job.Args.Month + ".pdf"})
		done <- err
		return err
	}, nil)
	client, err := pgqueue.New(pool, &pgqueue.Config{
		Workers: workers,
		Queues:  map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 1}},
	})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	row, err := client.Enqueue(ctx, ExportArgs{Month: "2026-11"}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("recorded:", <-done)
	var output string
	if err := pool.QueryRow(ctx, "SELECT output::text FROM pgqueue.jobs WHERE id = $1", row.ID).Scan(&output); err != nil {
		panic(err)
	}
	fmt.Println(output)
	// Output:
	// recorded: <nil>
	// {"url": "/reports/2026-11.pdf"}
}
