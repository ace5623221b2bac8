package otelpgqueue_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/otelpgqueue"
)

// The instrumentation's own cost per job, without a database: one
// attempt through the work middleware and its result through the
// Observer. cmd otelbench measures it inside a real burn-down.
func BenchmarkPerJob(b *testing.B) {
	for _, bc := range []struct {
		name      string
		traced    bool
		spanRatio float64
	}{{"Metrics", false, 0}, {"MetricsAndTraces", true, 0}, {"MetricsAndTracesSpanRatio1", true, 1}} {
		b.Run(bc.name, func(b *testing.B) {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			defer mp.Shutdown(context.Background())
			cfg := &otelpgqueue.Config{MeterProvider: mp, SpanRatio: bc.spanRatio}
			if bc.traced {
				// The recommended sampler: a job enqueued outside a
				// traced request is sampled at 1 % when offered.
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))),
					sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				defer tp.Shutdown(context.Background())
				cfg.TracerProvider = tp
			}
			inst, err := otelpgqueue.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			mw, obs := inst.WorkMiddleware(), inst.Observer()
			now := time.Now()
			job := &pgqueue.JobRow{ID: 1, Queue: "default", Kind: "bench", Attempt: 1, MaxAttempts: 25,
				RunAt: now, AttemptedAt: now.Add(time.Millisecond), Meta: []byte(`{}`)}
			next := func(context.Context) error { return nil }
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				_ = mw.Work(ctx, job, next)
				obs.ResultRecorded(job, pgqueue.OutcomeCompleted)
			}
		})
	}
}
