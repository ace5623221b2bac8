package workerkit_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/workerkit"
)

type welcomeArgs struct {
	To string `json:"to"`
}

func (welcomeArgs) Kind() string { return "welcome_email" }

type reportArgs struct{}

func (reportArgs) Kind() string { return "nightly_report" }

// A worker program: the handlers are registered, Main does the rest. Run it
// as
//
//	DATABASE_URL=postgres://... PGQUEUE_QUEUES=default=10,reports=1 \
//	PGQUEUE_HTTP_ADDR=:9090 ./worker
//
// and stop it with SIGTERM.
func Example() {
	workers := pgqueue.NewWorkers()
	pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[welcomeArgs]) error {
		slog.InfoContext(ctx, "sending", "to", job.Args.To)
		return nil
	}, nil)

	opts := &workerkit.Options{
		Name:     "mailer",
		Workers:  workers,
		Defaults: workerkit.Settings{Queues: map[string]int{"default": 10, "reports": 1}},
		// Setup sees the pool and the client's Config before the client
		// is built: periodic jobs, middleware, workers that need the pool.
		Setup: func(ctx context.Context, env *workerkit.Env) error {
			pgqueue.AddWorkerFunc(env.Config.Workers, func(ctx context.Context, job *pgqueue.Job[reportArgs]) error {
				_, err := env.Pool.Exec(ctx, "SELECT 1") // a business write
				return err
			}, nil)
			env.Config.PeriodicJobs = append(env.Config.PeriodicJobs, pgqueue.NewPeriodicJob("nightly-report",
				pgqueue.EverySchedule(24*time.Hour), func() (pgqueue.JobArgs, *pgqueue.EnqueueOpts) {
					return reportArgs{}, &pgqueue.EnqueueOpts{Queue: "reports"}
				}, nil))
			return nil
		},
	}
	_ = opts // in a program: workerkit.Main(opts)

	// Run is Main without the exit, here with only --help.
	code := workerkit.Run(context.Background(), opts, []string{"--help"}, io.Discard, io.Discard)
	fmt.Println("exit code", code)
	// Output: exit code 0
}

// A program's own instruments, made with Env.MeterProvider in Setup, are
// served at /metrics beside the kit's. A Setup's Observer is still
// called, and its QueuesInterval sets how often the maintenance leader
// reads the queues for the backlog gauges.
func Example_metrics() {
	opts := &workerkit.Options{
		Name:    "mailer",
		Workers: pgqueue.NewWorkers(),
		Setup: func(ctx context.Context, env *workerkit.Env) error {
			sent, err := env.MeterProvider.Meter("mailer").Int64Counter("mailer.emails.sent",
				metric.WithUnit("{email}"), metric.WithDescription("Emails handed to the provider."))
			if err != nil {
				return err
			}
			err = pgqueue.AddWorkerFunc(env.Config.Workers, func(ctx context.Context, job *pgqueue.Job[welcomeArgs]) error {
				sent.Add(ctx, 1) // served as mailer_emails_sent_total
				return nil
			}, nil)
			env.Config.Observer = &pgqueue.Observer{QueuesInterval: 5 * time.Second}
			return err
		},
	}
	_ = opts // in a program: workerkit.Main(opts)
}
