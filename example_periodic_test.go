package pgqueue_test

import (
	"context"
	"fmt"
	"time"

	"github.com/pgqueue/pgqueue"
)

type CleanupArgs struct {
	Scope string `json:"scope"`
}

func (CleanupArgs) Kind() string { return "cleanup" }

// Periodic jobs: every client of the schema may carry the same ones; the
// maintenance leader enqueues each instant once, whichever client leads.
func ExampleNewPeriodicJob() {
	ctx := context.Background()
	pool, drop := exampleDB()
	defer drop()

	// 02:30 every night, Paris time; a night missed while everything was
	// down is made up with one run.
	nightly, err := pgqueue.CronSchedule("CRON_TZ=Europe/Paris 0 30 2 * * *")
	if err != nil {
		panic(err)
	}
	ran := make(chan string, 10)
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[CleanupArgs]) error {
		ran <- job.Args.Scope
		return nil
	}, nil); err != nil {
		panic(err)
	}
	client, err := pgqueue.New(pool, &pgqueue.Config{
		Workers: workers,
		Queues:  map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 2}},
		PeriodicJobs: []*pgqueue.PeriodicJob{
			pgqueue.NewPeriodicJob("cleanup-nightly", nightly, func() (pgqueue.JobArgs, *pgqueue.EnqueueOpts) {
				return CleanupArgs{Scope: "everything"}, &pgqueue.EnqueueOpts{MaxAttempts: 3}
			}, &pgqueue.PeriodicJobOpts{Missed: pgqueue.MissedCatchUp}),
		},
	})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	// Jobs can be added and removed while the client runs.
	err = client.PeriodicJobs().Add(pgqueue.NewPeriodicJob("cleanup-sessions", pgqueue.EverySchedule(time.Second),
		func() (pgqueue.JobArgs, *pgqueue.EnqueueOpts) { return CleanupArgs{Scope: "sessions"}, nil }, nil))
	if err != nil {
		panic(err)
	}
	fmt.Println("ran", <-ran)
	client.PeriodicJobs().Remove("cleanup-sessions")
	fmt.Println(client.PeriodicJobs().Names())
	// Output:
	// ran sessions
	// [cleanup-nightly]
}

// The instants of a cron schedule with seconds and a time zone.
func ExampleCronSchedule() {
	s, err := pgqueue.CronSchedule("CRON_TZ=Europe/Paris 0 30 2 * * MON-FRI")
	if err != nil {
		panic(err)
	}
	at := time.Date(2024, 3, 29, 12, 0, 0, 0, time.UTC) // a Friday
	for range 2 {
		at = s.Next(at)
		fmt.Println(at.UTC()) // summer time began on Sunday
	}
	// Output:
	// 2024-04-01 00:30:00 +0000 UTC
	// 2024-04-02 00:30:00 +0000 UTC
}

// A time of day that a daylight saving change skips: by default it runs
// at the end of the gap; DSTStrict skips the day, as robfig/cron does.
func ExampleNewCronSchedule() {
	at := time.Date(2026, 3, 28, 22, 0, 0, 0, time.UTC) // 23:00 in Berlin
	for _, dst := range []pgqueue.DSTPolicy{pgqueue.DSTOnce, pgqueue.DSTStrict} {
		s, err := pgqueue.NewCronSchedule("CRON_TZ=Europe/Berlin 0 30 2 * * *", &pgqueue.CronOpts{DST: dst})
		if err != nil {
			panic(err)
		}
		fmt.Println(s.Next(at).UTC()) // 02:30 does not exist on March 29th
	}
	// Output:
	// 2026-03-29 01:00:00 +0000 UTC
	// 2026-03-30 00:30:00 +0000 UTC
}
