package otelpgqueue_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/otelpgqueue"
	"github.com/pgqueue/pgqueue/workerkit"
)

// Install puts the instrumentation in a client's config: its insert and
// work middleware first, and the Observer; the metrics are served to
// Prometheus from the handler NewPrometheus returns.
func ExampleInstrumentation_Install() {
	mp, metrics, err := otelpgqueue.NewPrometheus()
	if err != nil {
		panic(err)
	}
	defer mp.Shutdown(context.Background())
	tp := sdktrace.NewTracerProvider() // with your exporter and sampler
	defer tp.Shutdown(context.Background())
	inst, err := otelpgqueue.New(&otelpgqueue.Config{MeterProvider: mp, TracerProvider: tp})
	if err != nil {
		panic(err)
	}
	cfg := &pgqueue.Config{}
	if err := inst.Install(cfg); err != nil {
		panic(err)
	}
	fmt.Println(len(cfg.EnqueueMiddleware), len(cfg.WorkMiddleware), cfg.Observer != nil)
	// client, err := pgqueue.New(pool, cfg) ...

	srv := httptest.NewServer(metrics) // http.Handle("/metrics", metrics)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(strings.Contains(string(body), "go_goroutines"))
	// Output:
	// 1 1 true
	// true
}

// A worker program on workerkit whose /metrics serves the client's
// OpenTelemetry metrics instead of the kit's own counters.
func Example_workerkit() {
	workers := pgqueue.NewWorkers()
	// pgqueue.AddWorker(workers, ...)
	opts := &workerkit.Options{
		Workers: workers,
		Setup: func(ctx context.Context, env *workerkit.Env) error {
			mp, handler, err := otelpgqueue.NewPrometheus()
			if err != nil {
				return err
			}
			inst, err := otelpgqueue.New(&otelpgqueue.Config{MeterProvider: mp})
			if err != nil {
				return err
			}
			env.MetricsHandler = handler
			return inst.Install(env.Config)
		},
	}
	_ = opts // in main: workerkit.Main(opts)
}
