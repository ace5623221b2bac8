package pgqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pgqueue/pgqueue"
)

type InvoiceArgs struct {
	Number int `json:"number"`
}

func (InvoiceArgs) Kind() string { return "invoice" }

// Invoices go to their own queue with few attempts, unless the caller says
// otherwise.
func (InvoiceArgs) EnqueueOpts() pgqueue.EnqueueOpts {
	return pgqueue.EnqueueOpts{Queue: "billing", MaxAttempts: 3}
}

type requestIDKey struct{}

// Enqueue middleware carries a request id from the enqueuing request, in
// the job's meta, to work middleware that puts it in the handler's
// context.
func ExampleEnqueueMiddleware() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()

	stampRequest := pgqueue.EnqueueMiddlewareFunc(func(ctx context.Context, jobs []*pgqueue.EnqueueParams, next func(context.Context) (*pgqueue.EnqueuedJobs, error)) error {
		id, _ := ctx.Value(requestIDKey{}).(string)
		for _, job := range jobs {
			if job.Meta == nil {
				job.Meta = map[string]any{}
			}
			job.Meta["request_id"] = id
		}
		res, err := next(ctx)
		if err == nil {
			fmt.Println("inserted", res.Enqueued, "job(s) for request", id)
		}
		return err
	})
	restoreRequest := pgqueue.WorkMiddlewareFunc(func(ctx context.Context, job *pgqueue.JobRow, next func(context.Context) error) error {
		var meta struct {
			RequestID string `json:"request_id"`
		}
		if err := json.Unmarshal(job.Meta, &meta); err != nil {
			return err
		}
		return next(context.WithValue(ctx, requestIDKey{}, meta.RequestID))
	})

	done := make(chan string, 1)
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[InvoiceArgs]) error {
		done <- fmt.Sprintf("invoice %d on queue %s for request %s", job.Args.Number, job.Queue, ctx.Value(requestIDKey{}))
		return nil
	}, nil); err != nil {
		panic(err)
	}
	client, err := pgqueue.New(pool, &pgqueue.Config{
		Workers:           workers,
		Queues:            map[string]pgqueue.QueueConfig{"billing": {MaxWorkers: 2}},
		EnqueueMiddleware: []pgqueue.EnqueueMiddleware{stampRequest},
		WorkMiddleware:    []pgqueue.WorkMiddleware{restoreRequest},
	})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	reqCtx := context.WithValue(ctx, requestIDKey{}, "req-42")
	if _, err := client.Enqueue(reqCtx, InvoiceArgs{Number: 7}, nil); err != nil {
		panic(err)
	}
	fmt.Println(<-done)
	// Output:
	// inserted 1 job(s) for request req-42
	// invoice 7 on queue billing for request req-42
}

var errNoSuchCustomer = errors.New("no such customer")

// permanentErrors discards a job whose error no retry can fix.
type permanentErrors struct{}

func (permanentErrors) HandleError(ctx context.Context, job *pgqueue.JobRow, err error) *pgqueue.ErrorDecision {
	if errors.Is(err, errNoSuchCustomer) {
		return &pgqueue.ErrorDecision{Discard: true}
	}
	return nil // the retry policy decides
}

func (permanentErrors) HandlePanic(ctx context.Context, job *pgqueue.JobRow, value any, stack string) *pgqueue.ErrorDecision {
	return nil
}

// An error handler discards a job at its first attempt when its error is
// permanent; a worker's own retry policy spaces the retries of its kind.
func ExampleErrorHandler() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()

	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[InvoiceArgs]) error {
		return fmt.Errorf("invoice %d: %w", job.Args.Number, errNoSuchCustomer)
	}, &pgqueue.WorkerOpts{RetryPolicy: pgqueue.ExponentialBackoff{Base: 10 * time.Second}}); err != nil {
		panic(err)
	}
	client, err := pgqueue.New(pool, &pgqueue.Config{
		Workers:      workers,
		Queues:       map[string]pgqueue.QueueConfig{"billing": {MaxWorkers: 2}},
		ErrorHandler: permanentErrors{},
	})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	res, err := client.Enqueue(ctx, InvoiceArgs{Number: 8}, nil)
	if err != nil {
		panic(err)
	}
	for {
		job, err := client.JobGet(ctx, res.ID)
		if err != nil {
			panic(err)
		}
		if job.State.Final() {
			fmt.Printf("%s after attempt %d of %d: %s\n", job.State, job.Attempt, job.MaxAttempts, job.Errors[0].Error)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Output: discarded after attempt 1 of 3: invoice 8: no such customer
}
