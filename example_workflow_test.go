package pgqueue_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pgqueue/pgqueue"
)

type CountWordsArgs struct {
	File string `json:"file"`
}

func (CountWordsArgs) Kind() string { return "count_words" }

type WordReportArgs struct{}

func (WordReportArgs) Kind() string { return "word_report" }

// Make a job wait for others: a report that runs once every file is
// counted, and reads what each count recorded.
func ExampleEnqueueOpts_dependsOn() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()

	report := make(chan int)
	workers := pgqueue.NewWorkers()
	_ = pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[CountWordsArgs]) error {
		return pgqueue.RecordOutput(ctx, map[string]int{"words": len(job.Args.File) * 100})
	}, nil)
	_ = pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[WordReportArgs]) error {
		parents, err := pgqueue.ParentOutputs(ctx)
		if err != nil {
			return err
		}
		total := 0
		for _, p := range parents {
			var out struct{ Words int }
			if err := json.Unmarshal(p.Output, &out); err != nil {
				return err
			}
			total += out.Words
		}
		report <- total
		return nil
	}, nil)
	client, err := pgqueue.New(pool, &pgqueue.Config{
		Workers: workers,
		Queues:  map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 4}},
	})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	// The report depends on the three counts, by their positions in the
	// batch; it is blocked until the last of them completes.
	res, err := client.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
		{Args: CountWordsArgs{File: "a.txt"}},
		{Args: CountWordsArgs{File: "bb.txt"}},
		{Args: CountWordsArgs{File: "ccc.txt"}},
		{Args: WordReportArgs{}, Opts: &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{
			pgqueue.DependsOnIndex(0), pgqueue.DependsOnIndex(1), pgqueue.DependsOnIndex(2),
		}}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("words:", <-report)

	w, err := client.WorkflowGet(ctx, res.Workflow)
	if err != nil {
		panic(err)
	}
	fmt.Println("jobs:", len(w.Jobs), "edges:", len(w.Edges))
	// Output:
	// words: 1800
	// jobs: 4 edges: 3
}

// Cancel what of a workflow has not ended; jobs already final stay as
// they are.
func ExampleClient_WorkflowCancel() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()
	client, err := pgqueue.New(pool, nil) // no workers: nothing runs
	if err != nil {
		panic(err)
	}
	res, err := client.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
		{Args: CountWordsArgs{File: "a.txt"}},
		{Args: CountWordsArgs{File: "bb.txt"}},
		{Args: WordReportArgs{}, Opts: &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{
			pgqueue.DependsOnIndex(0), pgqueue.DependsOnIndex(1),
		}}},
	})
	if err != nil {
		panic(err)
	}
	if _, err := client.JobCancel(ctx, res.IDs[1]); err != nil {
		panic(err)
	}

	cancelled, err := client.WorkflowCancel(ctx, res.Workflow)
	if err != nil {
		panic(err)
	}
	w, err := client.WorkflowGet(ctx, res.Workflow)
	if err != nil {
		panic(err)
	}
	fmt.Println("cancelled now:", len(cancelled.Changed), "cancelled in all:", w.Counts[pgqueue.StateCancelled], "done:", w.Done())
	// Output:
	// cancelled now: 1 cancelled in all: 3 done: true
}

// Run again what of a workflow failed: a job that still waits for a job
// it depends on goes back to blocked, so the workflow keeps its order.
func ExampleClient_WorkflowRetry() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()
	client, err := pgqueue.New(pool, nil) // no workers: nothing runs
	if err != nil {
		panic(err)
	}
	res, err := client.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
		{Args: CountWordsArgs{File: "a.txt"}},
		{Args: WordReportArgs{}, Opts: &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnIndex(0)}}},
	})
	if err != nil {
		panic(err)
	}
	// The count is cancelled, and the report waiting for it with it.
	if _, err := client.JobCancel(ctx, res.IDs[0]); err != nil {
		panic(err)
	}

	retried, err := client.WorkflowRetry(ctx, res.Workflow)
	if err != nil {
		panic(err)
	}
	w, err := client.WorkflowGet(ctx, res.Workflow)
	if err != nil {
		panic(err)
	}
	fmt.Println("retried:", len(retried.Changed), "count:", w.Jobs[0].State, "report:", w.Jobs[1].State)
	// Output:
	// retried: 2 count: available report: blocked
}
