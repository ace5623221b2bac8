package pgqueue_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/pgqueue/pgqueue"
)

type ReportArgs struct {
	CustomerID int    `json:"customer_id"`
	Month      string `json:"month"`
}

func (ReportArgs) Kind() string { return "report" }

// An operator looks up a job by id; a deleted or pruned job is
// ErrJobNotFound.
func ExampleClient_JobGet() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()
	client, err := pgqueue.New(pool, nil)
	if err != nil {
		panic(err)
	}
	res, err := client.Enqueue(ctx, ReportArgs{CustomerID: 42, Month: "2026-11"}, &pgqueue.EnqueueOpts{Tags: []string{"monthly"}})
	if err != nil {
		panic(err)
	}
	job, err := client.JobGet(ctx, res.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(job.Kind, job.State, job.Tags, string(job.EncodedArgs))

	_, err = client.JobGet(ctx, res.ID+1)
	fmt.Println("next id found:", !errors.Is(err, pgqueue.ErrJobNotFound))
	// Output:
	// report available [monthly] {"month": "2026-11", "customer_id": 42}
	// next id found: false
}

// A dashboard pages through one customer's reports, newest first, two at
// a time: each page continues after the last with the cursor it returned.
func Example_jobList() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()
	client, err := pgqueue.New(pool, nil)
	if err != nil {
		panic(err)
	}
	var params []pgqueue.EnqueueManyParams
	for _, month := range []string{"2026-08", "2026-09", "2026-10", "2026-11"} {
		params = append(params, pgqueue.EnqueueManyParams{Args: ReportArgs{CustomerID: 42, Month: month}})
		params = append(params, pgqueue.EnqueueManyParams{Args: ReportArgs{CustomerID: 7, Month: month}})
	}
	if _, err := client.EnqueueMany(ctx, params); err != nil {
		panic(err)
	}

	list := &pgqueue.JobListParams{
		Kinds:       []string{"report"},
		States:      []pgqueue.JobState{pgqueue.StateAvailable, pgqueue.StateScheduled},
		ArgsContain: map[string]any{"customer_id": 42},
		OrderBy:     pgqueue.JobListOrderID,
		Descending:  true,
		Limit:       2,
	}
	for page := 1; ; page++ {
		res, err := client.JobList(ctx, list)
		if err != nil {
			panic(err)
		}
		for _, job := range res.Jobs {
			fmt.Printf("page %d: %s\n", page, job.EncodedArgs)
		}
		if res.NextCursor == "" {
			break
		}
		list.Cursor = res.NextCursor
	}
	// Output:
	// page 1: {"month": "2026-11", "customer_id": 42}
	// page 1: {"month": "2026-10", "customer_id": 42}
	// page 2: {"month": "2026-09", "customer_id": 42}
	// page 2: {"month": "2026-08", "customer_id": 42}
}
