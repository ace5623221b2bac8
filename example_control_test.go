package pgqueue_test

import (
	"context"
	"fmt"

	"github.com/pgqueue/pgqueue"
)

// An operator pauses the mail queue while the mail provider is down: jobs
// still enqueue and wait, no client claims them, and the pause holds
// across restarts until QueueResume, which wakes the workers at once.
func ExampleClient_QueuePause() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()
	client, err := pgqueue.New(pool, nil)
	if err != nil {
		panic(err)
	}
	if err := client.QueuePause(ctx, "mail"); err != nil {
		panic(err)
	}
	if _, err := client.Enqueue(ctx, emailArgs{To: "ada@example.com"}, &pgqueue.EnqueueOpts{Queue: "mail"}); err != nil {
		panic(err)
	}
	show := func() {
		queues, err := client.QueueList(ctx)
		if err != nil {
			panic(err)
		}
		for _, q := range queues {
			fmt.Printf("%s paused=%v available=%d\n", q.Name, q.Paused, q.Available)
		}
	}
	show()
	if err := client.QueueResume(ctx, "mail"); err != nil {
		panic(err)
	}
	show()
	// Output:
	// mail paused=true available=1
	// mail paused=false available=1
}

// A job cancelled by mistake runs again: JobRetry makes it available now,
// keeping its attempt count and error history.
func ExampleClient_JobRetry() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()
	client, err := pgqueue.New(pool, nil)
	if err != nil {
		panic(err)
	}
	res, err := client.Enqueue(ctx, emailArgs{To: "ada@example.com"}, nil)
	if err != nil {
		panic(err)
	}
	cancelled, err := client.JobCancel(ctx, res.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println("cancelled:", cancelled.State)

	job, err := client.JobRetry(ctx, res.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println("retried:", job.State, "attempt", job.Attempt, "of", job.MaxAttempts)

	// Many at once: running jobs are skipped and reported, never touched.
	many, err := client.JobRetryMany(ctx, []int64{res.ID, 4711})
	if err != nil {
		panic(err)
	}
	fmt.Println("already available:", len(many.Unchanged), "not found:", many.NotFound)
	// Output:
	// cancelled: cancelled
	// retried: available attempt 0 of 25
	// already available: 1 not found: [4711]
}
