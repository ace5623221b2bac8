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
