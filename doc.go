// Package pgqueue is a job queue for Go programs that already run
// PostgreSQL: jobs are rows, workers claim them with FOR UPDATE SKIP
// LOCKED, and every write about a claimed job is fenced, so a worker that
// paused past its lease can never overwrite the work of the worker that
// took over. Locks (transaction, session and lease locks, leader election)
// are in the sibling package pglock.
//
// # A job's path
//
// Enqueue. [Client.Enqueue] and [Client.EnqueueTx] validate and encode a
// job ([JobArgs], [EnqueueOpts]) and insert it with a NOTIFY on the schema's
// channel, in one round trip and in the caller's transaction when there
// is one, so the job and the wake-up exist only if it commits.
// [Client.EnqueueMany] writes large batches with binary COPY. (enqueue.go,
// unique.go; the checks, unique keys, COPY and writes in internal/enqueue;
// the statements in internal/jobsql/sql/.)
//
// Claim. Once started ([Client.Start]), a client runs one producer per queue it
// works ([Config.Queues]). A producer claims up to its free worker slots
// with internal/jobsql/sql/claim.sql, the one statement that decides which jobs are taken
// and in what order (priority, run_at, id): each claimed job becomes
// running with a new fence token from the schema's fence_seq and a lease
// of [Config.JobLease] by the database clock. Notifications, a poller and
// finished jobs tell the producer when to claim. (internal/producer:
// producer.go, claim.go, claim_ahead.go, poller.go.)
//
// Work. The executor runs the job's handler, registered by kind with
// [AddWorker] in [Workers], with a timeout and a context that is cancelled
// when the claim is lost ([ErrJobLeaseLost]) or the client stops
// ([ErrStopping]). A handler returns nil, an error (retried after
// [Config.RetryPolicy] until [EnqueueOpts.MaxAttempts], then discarded),
// [JobCancel] or [JobSnooze]. Singleton jobs ([EnqueueOpts.SingletonKey])
// run under their key's lock. While jobs run, heartbeats renew their
// leases in one statement. (worker.go, retry.go; internal/executor:
// executor.go, singleton.go, active_jobs.go, heartbeat.go.)
//
// Fence. Every later write about the job names its fence; the database
// refuses a stale one. Handlers get the token as [JobRow].Fence and can
// fence their own writes in one call with [Job.CheckFenceTx] (any
// resource: [Client.CheckFenceTx]), or commit their effects together with
// the job's completion with [Client.CompleteTx]. (fence.go.)
//
// Hooks. [Config.EnqueueMiddleware] wraps every enqueue (periodic runs
// too) and may change a job before it is validated, for instance to carry
// a trace context in its meta; [Config.WorkMiddleware] and
// [WorkerOpts.Middleware] wrap each attempt; [Config.ErrorHandler] is told
// of every failed attempt, panics with their stack, and may discard the
// job at once. Per kind, [WorkerOpts.RetryPolicy] and an args type's
// [JobArgsWithEnqueueOpts] defaults. (middleware.go, retry.go.)
//
// Complete. The completer gathers results for a few milliseconds and
// writes each batch in one fenced statement; when a reply is lost it reads
// the jobs back to learn what landed. (internal/completer;
// internal/jobsql/outcome.go.)
//
// Workflows. A job enqueued with [EnqueueOpts.DependsOn] is blocked,
// invisible to claims, until the jobs it depends on have completed: the
// fenced statement that completes the last of them releases it, in the
// same transaction, so a stale completion never does. [ParentFailurePolicy]
// says what a parent's discard or cancellation does to it;
// [Client.WorkflowGet] reads a workflow, [ParentOutputs] a handler's
// parents' outputs, and [Client.EnqueueBatch] adds a callback that runs
// once a batch has finished. (workflow.go; internal/enqueue/workflow.go;
// migrations/000012_workflows.up.sql.)
//
// Maintenance. One client per schema, elected on a pglock lease lock, makes
// due scheduled jobs available and rescues running jobs whose lease
// expired, giving each a new fence. It also enqueues the periodic jobs
// ([Config.PeriodicJobs], [NewPeriodicJob]), each instant of a schedule
// once, recorded in the same transaction as its job. And it deletes
// finished jobs once their state's retention has passed
// ([Config.CompletedJobRetention] and the others), in short batches.
// (internal/maintenance: leader.go and a file per task; the periodic
// API in periodic.go.)
//
// [Migrate] creates and upgrades the schema from the embedded SQL files of
// the migrations package; every statement and migration names its objects
// in the configured schema ([Config.Schema]). (migrate.go,
// migrate_privilege.go; the statements are loaded by internal/jobsql.)
//
// # Vocabulary
//
// A claim is a worker's hold on a job: its fence token and its job lease
// (the row's lease_until, [Config.JobLease] long, renewed by heartbeats).
// A claim is lost when the lease runs out or another claim takes the job;
// that is [ErrJobLeaseLost]. A fence token is a number drawn from the
// schema's one sequence for every claim, rescue and lock acquisition, so it
// grows strictly: the database keeps the highest it has seen and refuses
// lower ones. Locks, lease locks and their "lost" error ([pglock.ErrLost])
// are described in package pglock.
//
// # Where to add things
//
// This package is the public API and its wiring; the machinery lives in
// internal packages named for their parts (internal/producer, executor,
// completer, maintenance, enqueue, jobsql), which never import this one
// (docs/dev/architecture.md draws the map). A job state: the CHECK in a
// new migration, [pgqueuetype.JobState], and the statements in
// internal/jobsql/sql/ that move rows between states. A maintenance task:
// a file <task>.go in internal/maintenance and a field of its Leader. A
// lock kind: package pglock. Every default of [Config] is in config.go;
// the errors of the public API are in errors.go, those the machinery
// returns in package pgqueuetype.
package pgqueue
