// Package workerkit turns a pgqueue client into a well-behaved worker
// process, so a team's worker main is a few lines: register workers, call
// Main.
//
//	func main() {
//		workers := pgqueue.NewWorkers()
//		pgqueue.AddWorkerFunc(workers, sendEmail, nil)
//		workerkit.Main(&workerkit.Options{Name: "mailer", Workers: workers})
//	}
//
// What the process does:
//
//   - Settings from flags and the environment (see Settings for every
//     name): DATABASE_URL, PGQUEUE_DIRECT_DATABASE_URL (behind a
//     pooler), PGQUEUE_QUEUES ("default=10,mail=2"), PGQUEUE_SCHEMA, PGQUEUE_JOB_LEASE, PGQUEUE_SHUTDOWN_TIMEOUT,
//     PGQUEUE_HTTP_ADDR, PGQUEUE_MIGRATE and the log settings; --help
//     lists them.
//   - A failed start ends the process with exit code 1 and a log line
//     that says why: database unreachable, schema not migrated (or older
//     than the binary), no workers, listener address taken. Flag mistakes
//     exit with 2.
//   - The first SIGTERM or SIGINT stops claiming and lets running jobs
//     finish for up to the shutdown timeout (default 30s); then they are
//     cancelled and handed back to their queue with their attempt given
//     back. A second signal cancels them at once. The exit code is 0 either
//     way: the process stopped because it was asked to.
//   - With an HTTP address: /healthz (200 while the process runs),
//     /readyz (200 once started while the database answers and the
//     schema is current; 503 while starting and draining, and while the
//     schema is dropped or migrated down under it) and /metrics in the
//     Prometheus text format.
//   - Optional migrate-on-start (--migrate), for a service that owns its
//     database alone; off by default.
//   - Logs through log/slog: JSON, or text when stderr is a terminal. The
//     client logs through the same logger.
//
// # Metrics
//
// /metrics serves otelpgqueue's instruments through the OpenTelemetry
// Prometheus exporter (otelpgqueue.NewPrometheus), the same names a
// program that installs otelpgqueue itself serves: counters of what
// became of each job, histograms of the queue wait and the run time, the
// jobs running in this process, and the maintenance leader's backlog
// gauges per queue and state; beside them the kit's own gauges (readiness,
// draining, the pool's connections) and the Go runtime's and process's
// collectors. Env.MeterProvider lets Setup add the program's own
// instruments; Env.TracerProvider turns on otelpgqueue's spans.
// docs/guides/observability.md lists every metric with its labels and
// unit.
//
// The package is a Go module of its own: the OpenTelemetry SDK and the
// Prometheus client it needs stay out of the builds of programs that use
// only pgqueue's core.
package workerkit
