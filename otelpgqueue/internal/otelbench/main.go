// Command otelbench measures what otelpgqueue costs the client: the
// burn-down of `pgqueue bench` (EnqueueMany of --jobs no-op jobs, then a
// client with --workers workers works them all), run without
// instrumentation, with empty hooks (a work middleware and an Observer
// that do nothing), with its metrics (OpenTelemetry SDK and the Prometheus
// exporter), with metrics and traces sampled as docs/guides/observability.md
// recommends (ParentBased(TraceIDRatioBased(--trace-ratio))) and with
// metrics and every span sampled (AlwaysSample), spans batched to an
// exporter that drops them, in alternating order, --rounds times. It
// prints each run's rate and the process CPU time (user and system, from
// getrusage) per job of the working phase, a garbage collection at each
// end included (the run pays for its own garbage, not the last run's);
// then each variant's mean and its difference from none in the same
// rounds. On a machine whose CPU others share, the CPU per job is the
// figure that does not depend on them.
//
//	go run ./internal/otelbench --database-url postgres://postgres@127.0.0.1:5432/scratch --jobs 200000 --rounds 3
//
// It empties the schema pgqueue_bench of that database at every run.
// --cpuprofile DIR writes a CPU profile of each run's working phase to
// DIR/<variant>-<round>.pprof.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/cmd/pgqueue/bench"
	"github.com/pgqueue/pgqueue/otelpgqueue"
)

func main() {
	url := flag.String("database-url", os.Getenv("DATABASE_URL"), "scratch database (its schema pgqueue_bench is emptied)")
	jobs := flag.Int("jobs", 200000, "jobs per burn-down")
	workers := flag.Int("workers", 1000, "the client's MaxWorkers")
	rounds := flag.Int("rounds", 3, "rounds of the variants, each round in another order")
	only := flag.String("variants", "", "comma-separated variants to run (default all)")
	ratio := flag.Float64("trace-ratio", 0.01, "the sampled-traces variant's TraceIDRatioBased fraction")
	spanRatio := flag.Float64("span-ratio", 0, "the metrics+traces variant's otelpgqueue Config.SpanRatio (0, the default, as in the library)")
	profiles := flag.String("cpuprofile", "", "directory for a CPU profile of each run's working phase")
	flag.Parse()
	o := options{url: *url, jobs: *jobs, workers: *workers, rounds: *rounds, only: *only, ratio: *ratio, spanRatio: *spanRatio, profiles: *profiles}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "otelbench:", err)
		os.Exit(1)
	}
}

type options struct {
	url                   string
	jobs, workers, rounds int
	only                  string
	ratio, spanRatio      float64
	profiles              string
}

type variant struct {
	name       string
	instrument func() (func(*pgqueue.Config) error, func(), error)
}

func run(o options) error {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(o.url)
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
				c.Observer = &pgqueue.Observer{ResultRecorded: func(*pgqueue.JobRow, pgqueue.Outcome) {}, Claimed: func(string, int) {}}
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
		{"metrics+traces", traced(ctx, sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.ratio)), o.spanRatio)},
		{"metrics+all-spans", traced(ctx, sdktrace.AlwaysSample(), 1)},
	}
	if o.only != "" {
		var keep []variant
		for _, v := range variants {
			if slices.Contains(strings.Split(o.only, ","), v.name) {
				keep = append(keep, v)
			}
		}
		variants = keep
	}
	if o.profiles != "" {
		if err := os.MkdirAll(o.profiles, 0o755); err != nil {
			return err
		}
	}
	// perJob[variant][round] is the run's CPU µs per job.
	perJob := map[string][]float64{}
	fmt.Printf("%-17s %5s %10s %10s %12s %12s\n", "variant", "round", "jobs/s", "cpu s", "cpu µs/job", "enqueue/s")
	for r := range o.rounds {
		for i := range variants {
			v := variants[(i+r)%len(variants)]
			instrument, shutdown, err := v.instrument()
			if err != nil {
				return err
			}
			bc := &bench.Config{Pool: pool, Jobs: o.jobs, Workers: o.workers, Instrument: instrument}
			if err := bench.Prepare(ctx, bc); err != nil {
				return err
			}
			enq, err := bench.Enqueue(ctx, bc)
			if err != nil {
				return err
			}
			stopProfile, err := startProfile(o.profiles, fmt.Sprintf("%s-%d", v.name, r+1))
			if err != nil {
				return err
			}
			// The garbage of the runs before (the enqueue's 200,000
			// params) is not this run's; what this run leaves is.
			runtime.GC()
			before := cpu()
			res, err := bench.BurnDown(ctx, bc)
			runtime.GC()
			used := cpu() - before
			stopProfile()
			shutdown()
			if err != nil {
				return err
			}
			us := float64(used.Microseconds()) / float64(res.Jobs)
			perJob[v.name] = append(perJob[v.name], us)
			fmt.Printf("%-17s %5d %10.0f %10.2f %12.2f %12.0f\n", v.name, r+1, res.JobsPerSecond(), used.Seconds(), us, enq.JobsPerSecond())
		}
	}
	summarize(variants, perJob)
	return nil
}

// traced is a variant with metrics and spans sampled by sampler, of the
// attempts otelpgqueue offers at spanRatio.
func traced(ctx context.Context, sampler sdktrace.Sampler, spanRatio float64) func() (func(*pgqueue.Config) error, func(), error) {
	return func() (func(*pgqueue.Config) error, func(), error) {
		mp, _, err := otelpgqueue.NewPrometheus()
		if err != nil {
			return nil, nil, err
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		inst, err := otelpgqueue.New(&otelpgqueue.Config{MeterProvider: mp, TracerProvider: tp, SpanRatio: spanRatio})
		if err != nil {
			return nil, nil, err
		}
		return inst.Install, func() { _ = mp.Shutdown(ctx); _ = tp.Shutdown(ctx) }, nil
	}
}

// summarize prints each variant's mean CPU per job and, against none in
// the same rounds, the mean difference in µs and the ratio of the means.
func summarize(variants []variant, perJob map[string][]float64) {
	base := perJob["none"]
	fmt.Printf("\n%-17s %12s %14s %10s   %s\n", "variant", "mean µs/job", "Δ vs none µs", "vs none", "Δ per round µs")
	for _, v := range variants {
		runs := perJob[v.name]
		line := fmt.Sprintf("%-17s %12.2f", v.name, mean(runs))
		if len(base) == len(runs) && v.name != "none" {
			diffs := make([]string, len(runs))
			var sum float64
			for i := range runs {
				d := runs[i] - base[i]
				sum += d
				diffs[i] = fmt.Sprintf("%+.2f", d)
			}
			line += fmt.Sprintf(" %+14.2f %10.3f   %s", sum/float64(len(runs)), mean(runs)/mean(base), strings.Join(diffs, " "))
		}
		fmt.Println(line)
	}
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(max(len(xs), 1))
}

// startProfile starts a CPU profile into dir/name.pprof; with no dir it
// does nothing.
func startProfile(dir, name string) (stop func(), err error) {
	if dir == "" {
		return func() {}, nil
	}
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// cpu is the process's CPU time so far, user and system.
func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
