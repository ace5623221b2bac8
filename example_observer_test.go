package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pgqueue/pgqueue"
)

// An Observer counts what became of each job, as a metrics library would:
// the middleware sees attempts, the Observer sees what was written.
func ExampleObserver() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()

	var (
		mu      sync.Mutex
		results = map[pgqueue.Outcome]int{}
		done    = make(chan struct{})
	)
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[emailArgs]) error {
		if job.Args.To == "" {
			return errors.New("no address")
		}
		return nil
	}, nil); err != nil {
		panic(err)
	}
	client, err := pgqueue.New(pool, &pgqueue.Config{
		Workers: workers,
		Queues:  map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 2}},
		Observer: &pgqueue.Observer{
			ResultRecorded: func(job *pgqueue.JobRow, r pgqueue.Outcome) {
				mu.Lock()
				defer mu.Unlock()
				results[r]++
				if results[pgqueue.OutcomeCompleted]+results[pgqueue.OutcomeDiscarded] == 3 {
					close(done)
				}
			},
		},
	})
	if err != nil {
		panic(err)
	}
	for _, to := range []string{"ada@example.com", "bob@example.com", ""} {
		if _, err := client.Enqueue(ctx, emailArgs{To: to}, &pgqueue.EnqueueOpts{MaxAttempts: 1}); err != nil {
			panic(err)
		}
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		panic("jobs not worked")
	}
	if err := client.Stop(ctx); err != nil {
		panic(err)
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Println("completed:", results[pgqueue.OutcomeCompleted], "discarded:", results[pgqueue.OutcomeDiscarded])
	// Output: completed: 2 discarded: 1
}
