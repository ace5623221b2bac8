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
//     /readyz (200 once started while the database answers; 503 while
//     starting and draining) and /metrics in the Prometheus text format.
//   - Optional migrate-on-start (--migrate), for a service that owns its
//     database alone; off by default.
//   - Logs through log/slog: JSON, or text when stderr is a terminal. The
//     client logs through the same logger.
//
// # Metrics
//
// /metrics shows what the kit counts around the client, with no
// Prometheus library: attempts by kind and outcome
// (pgqueue_attempts_total, from a work middleware) and their time
// (pgqueue_attempt_duration_seconds); from the client's Config.Observer,
// claims, written results, writes refused by a fence and rescues; jobs
// running in this process, the pool's connections, readiness, and, for
// the whole schema, each queue's
// unfinished jobs by state, the age of its oldest available job and its
// pause, from Client.QueueList read at most every 5 seconds however often
// it is scraped. The queue figures are the same from every process of a
// schema: aggregate them with max, not sum.
//
// The package uses only the standard library beside pgqueue and pgx, so
// it lives in pgqueue's module.
package workerkit
