// Command otelbench measures what otelpgqueue costs the client: the
// burn-down of `pgqueue bench` (EnqueueMany of --jobs no-op jobs, then a
// client with --workers workers works them all), run without
// instrumentation, with empty hooks (a work middleware and an Observer
// that do nothing), with its metrics (OpenTelemetry SDK and the Prometheus
// exporter) and with metrics and traces (every span sampled, batched to an
// exporter that drops them), in alternating order, --rounds times. It
// prints each run's rate and the process CPU time (user and system, from
// getrusage) per job of the working phase: on a machine whose CPU others
// share, the CPU per job is the figure that does not depend on them.
//
//	go run ./internal/otelbench --database-url postgres://postgres@127.0.0.1:5432/scratch --jobs 200000 --rounds 3
//
// It empties the schema pgqueue_bench of that database at every run.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/bench"
	"github.com/pgqueue/pgqueue/otelpgqueue"
)

func main() {
	url := flag.String("database-url", os.Getenv("DATABASE_URL"), "scratch database (its schema pgqueue_bench is emptied)")
	jobs := flag.Int("jobs", 200000, "jobs per burn-down")
	workers := flag.Int("workers", 1000, "the client's MaxWorkers")
	rounds := flag.Int("rounds", 3, "rounds of the variants, each round in another order")
	only := flag.String("variants", "", "comma-separated variants to run (default all)")
	flag.Parse()
	if err := run(*url, *jobs, *workers, *rounds, *only); err != nil {
		fmt.Fprintln(os.Stderr, "otelbench:", err)
		os.Exit(1)
	}
}

type variant struct {
	name       string
	instrument func() (func(*pgqueue.Config) error, func(), error)
}

func run(url string, jobs, workers, rounds int, only string) error {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()

	variants := []variant{
		{"none", func() (func(*pgqueue.Config) error, func(), error) { return nil, func() {}, nil }},
		{"empty-hooks", func() (func(*pgqueue.Config) error, func(), error) {
			// A work middleware that only calls next and an Observer that
			// does nothing: what the hooks cost before OpenTelemetry.
			return func(c *pgqueue.Config) error {
				c.WorkMiddleware = append(c.WorkMiddleware, pgqueue.WorkMiddlewareFunc(
					func(ctx context.Context, _ *pgqueue.JobRow, next func(context.Context) error) error { return next(ctx) }))
				c.Observer = &pgqueue.Observer{Recorded: func(*pgqueue.JobRow, pgqueue.JobResult) {}, Claimed: func(string, int) {}}
				return nil
			}, func() {}, nil
		}},
		{"metrics", func() (func(*pgqueue.Config) error, func(), error) {
			mp, _, err := otelpgqueue.NewPrometheus()
			if err != nil {
				return nil, nil, err
			}
			inst, err := otelpgqueue.New(&otelpgqueue.Config{MeterProvider: mp})
			if err != nil {
				return nil, nil, err
			}
			return inst.Install, func() { _ = mp.Shutdown(ctx) }, nil
		}},
		{"metrics+traces", func() (func(*pgqueue.Config) error, func(), error) {
			mp, _, err := otelpgqueue.NewPrometheus()
			if err != nil {
				return nil, nil, err
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			inst, err := otelpgqueue.New(&otelpgqueue.Config{MeterProvider: mp, TracerProvider: tp})
			if err != nil {
				return nil, nil, err
			}
			return inst.Install, func() { _ = mp.Shutdown(ctx); _ = tp.Shutdown(ctx) }, nil
		}},
	}
	if only != "" {
		var keep []variant
		for _, v := range variants {
			if slices.Contains(strings.Split(only, ","), v.name) {
				keep = append(keep, v)
			}
		}
		variants = keep
	}
	fmt.Printf("%-15s %5s %10s %10s %12s %12s\n", "variant", "round", "jobs/s", "cpu s", "cpu µs/job", "enqueue/s")
	for r := range rounds {
		for i := range variants {
			v := variants[(i+r)%len(variants)]
			instrument, shutdown, err := v.instrument()
			if err != nil {
				return err
			}
			bc := &bench.Config{Pool: pool, Jobs: jobs, Workers: workers, Instrument: instrument}
			if err := bench.Prepare(ctx, bc); err != nil {
				return err
			}
			enq, err := bench.Enqueue(ctx, bc)
			if err != nil {
				return err
			}
			before := cpu()
			res, err := bench.BurnDown(ctx, bc)
			used := cpu() - before
			shutdown()
			if err != nil {
				return err
			}
			fmt.Printf("%-15s %5d %10.0f %10.2f %12.1f %12.0f\n", v.name, r+1, res.JobsPerSecond(), used.Seconds(),
				float64(used.Microseconds())/float64(res.Jobs), enq.JobsPerSecond())
		}
	}
	return nil
}

// cpu is the process's CPU time so far, user and system.
func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
