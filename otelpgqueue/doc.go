// Package otelpgqueue records a pgqueue client's metrics and traces with
// OpenTelemetry, and serves the metrics to Prometheus.
//
// It is a Go module of its own so that the OpenTelemetry SDK and the
// Prometheus client stay out of the builds of programs that use pgqueue
// without it; it depends only on the hooks of the core: insert and work
// middleware and pgqueue.Observer.
//
// Install it in the client's config before pgqueue.New:
//
//	inst, err := otelpgqueue.New(&otelpgqueue.Config{MeterProvider: mp, TracerProvider: tp})
//	...
//	cfg := &pgqueue.Config{Workers: workers, Queues: queues}
//	if err := inst.Install(cfg); err != nil { ... }
//	client, err := pgqueue.New(pool, cfg)
//
// # Metrics
//
// Counters, by queue and kind: pgqueue.jobs.enqueued, .completed,
// .failed (attempts), .retried, .discarded, .cancelled, .snoozed,
// .released, .rescued (and state) and pgqueue.writes.refused (and write).
// Histograms: pgqueue.job.wait (from run_at to the attempt's start, by the
// database clock), pgqueue.job.duration (and outcome), pgqueue.claim.size
// and pgqueue.complete.size. A gauge of the jobs this process runs now:
// pgqueue.jobs.running. Gauges from the maintenance leader only, every
// pgqueue.Observer.QueuesInterval: pgqueue.queue.jobs (by queue and state:
// blocked, scheduled, available, running), pgqueue.queue.oldest_available_age and
// pgqueue.queue.paused. They come from Client.QueueList, which counts from
// partial indexes over the live states; finished jobs are not gauged
// (count them with the counters' rates: a gauge over completed rows would
// scan the retention's worth of rows at each interval).
//
// # Traces
//
// Only with Config.TracerProvider set (nil records no spans, at no cost
// per job; pass otel.GetTracerProvider() for the global one), an insert
// runs in a producer span "pgqueue.enqueue", whose trace context, when
// sampled, is stored in each job's meta under MetaKey. An attempt of such
// a job runs in a consumer span "pgqueue.work <kind>", a child of that
// span and linked to it, so a trace shows the request that enqueued a job
// and the work it caused, and the handler's own spans are children of the
// attempt's. Inserts and attempts with no sampled parent get a span only
// at Config.SpanRatio (default 0), decided before the SDK is called. The client's log
// records of an attempt (failed, discarded, panicked, cancelled) take the
// handler's context: a slog handler that reads trace ids from the context
// puts the attempt's span on them.
//
// # Prometheus
//
// NewPrometheus returns a MeterProvider with the OpenTelemetry Prometheus
// exporter and the http.Handler of its /metrics. workerkit's /metrics is
// this handler with this package installed, so a worker on the kit and a
// program that installs otelpgqueue itself serve the same names.
package otelpgqueue
