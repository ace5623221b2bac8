package pgqueue

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/enqueue"
	"github.com/pgqueue/pgqueue/internal/sqlschema"
	"github.com/pgqueue/pgqueue/internal/warnlog"
	"github.com/pgqueue/pgqueue/pglock"
)

// The names a user passes to say "the default".
const (
	// SchemaDefault is the schema pgqueue's tables live in unless
	// Config.Schema says otherwise: pass it to Migrate and GrantsSQL.
	SchemaDefault = sqlschema.Default
	// QueueDefault is the queue of a job enqueued without one.
	QueueDefault = "default"
)

// The defaults of Config, EnqueueOpts and PeriodicJobOpts; each field's
// comment states its own.
const (
	defaultMaxAttempts           = 25
	defaultMaxArgsSize           = 1 << 20
	defaultMaxOutputSize         = 256 << 10
	defaultJobLease              = 30 * time.Second
	defaultJobTimeout            = time.Minute
	defaultFetchPollInterval     = time.Second
	defaultSchedulerInterval     = time.Second
	defaultUnknownKindDelay      = time.Minute
	defaultUnknownKindMaxTries   = 10
	defaultLeaderTTL             = 10 * time.Second
	defaultRescueInterval        = 5 * time.Second
	defaultClaimBatchDelay       = 5 * time.Millisecond
	defaultClaimAhead            = 250 * time.Millisecond
	defaultCompleteBatchSize     = 1000
	defaultCompleteBatchDelay    = 2 * time.Millisecond
	defaultCancelGrace           = 5 * time.Second
	defaultSingletonRetryDelay   = time.Second
	defaultPeriodicMissedAfter   = time.Minute
	defaultCompletedJobRetention = 24 * time.Hour
	defaultCancelledJobRetention = 7 * 24 * time.Hour
	defaultDiscardedJobRetention = 7 * 24 * time.Hour
	defaultPruneInterval         = 30 * time.Second
)

// RetainForever, as Config.CompletedJobRetention, CancelledJobRetention or
// DiscardedJobRetention, keeps the jobs of that state forever. It is not
// zero because a zero Config field means its default.
const RetainForever time.Duration = -1

// defaultRetryPolicy is Config.RetryPolicy's default: 1s, 2s, 4s, ... up to
// an hour, ±20%.
var defaultRetryPolicy RetryPolicy = ExponentialBackoff{}

// QueueConfig configures how a client works one queue.
type QueueConfig struct {
	// MaxWorkers is how many jobs of the queue the client runs at once.
	// Required: at least 1.
	MaxWorkers int
}

// Config configures a Client. The zero value (or a nil *Config) is a client
// that enqueues into the default schema and works no queues.
type Config struct {
	// Schema is the schema pgqueue's tables live in, as created by Migrate
	// with the same name. Default SchemaDefault. Must be a lower-case SQL
	// identifier of at most 63 bytes (^[a-z_][a-z0-9_]{0,62}$).
	Schema string

	// Queues are the queues this client works, each with its concurrency.
	// Empty: the client only enqueues, and Start is not needed.
	Queues map[string]QueueConfig

	// Workers holds the handlers by job kind. Required when Queues is not
	// empty.
	Workers *Workers

	// ID names this client in running jobs' worker_id. Default: host name,
	// process id and a random suffix.
	ID string

	// JobLease is how long a job's claim is valid: a claimed job's
	// lease_until is now() + JobLease by the database clock, renewed by
	// heartbeats. A claim whose lease runs out is lost (ErrJobLeaseLost)
	// and the job is rescued. Not to be confused with a lease lock
	// (pglock.LeaseLock). Default 30s; at least 1s.
	JobLease time.Duration

	// HeartbeatInterval is how often the leases of running jobs are
	// renewed. Default JobLease/3.
	HeartbeatInterval time.Duration

	// RescueInterval is how often running jobs whose lease expired are put
	// back (to be retried) or discarded (attempts used up). Default
	// 5s.
	RescueInterval time.Duration

	// JobTimeout bounds each job's handler, unless its kind sets its own in
	// WorkerOpts. Default 1m; negative means no limit.
	JobTimeout time.Duration

	// FetchPollInterval is how often the client asks the database, in one
	// query for all its queues, whether jobs wait: the fallback for missed
	// notifications, so a job waits at most about this long for a free
	// worker that missed its notification. Default
	// 1s.
	FetchPollInterval time.Duration

	// PollOnly, when true, keeps the client from holding a LISTEN
	// connection: it finds new jobs by polling every FetchPollInterval and
	// learns of JobCancel requests for its running jobs at their next
	// heartbeat (HeartbeatInterval) instead of at once. For connections
	// that keep no session, such as a pooler in transaction mode.
	// Default false.
	PollOnly bool

	// DirectConnConfig is a connection to PostgreSQL itself, not through
	// a pooler, for what needs a session of its own: the LISTEN
	// connection and session locks (SingletonSession). Set it when the
	// pool goes through a pooler in transaction mode such as PgBouncer:
	// without it the client polls every FetchPollInterval and logs one
	// warning saying so, and session locks are refused
	// (pglock.ErrNoSessionAffinity). Start returns ErrInvalid when it
	// does not reach PostgreSQL directly. Default: the pool's ConnConfig
	// (it is copied).
	DirectConnConfig *pgx.ConnConfig

	// SchedulerInterval is how often due scheduled jobs are made available,
	// so a job starts within about this long of its run_at. Default
	// 1s.
	SchedulerInterval time.Duration

	// RetryPolicy computes the delay before a failed job's next attempt.
	// Default: ExponentialBackoff{} (1s, 2s, 4s, ... up to an hour, ±20%).
	RetryPolicy RetryPolicy

	// LeaderTTL is the lease of the maintenance leader: one client per
	// schema runs the scheduler and the rescuer at a time, and when it dies
	// another takes over within about this long. Default 10s.
	LeaderTTL time.Duration

	// UnknownKindDelay is how long a job whose kind has no worker waits
	// before it is offered again. Its attempt is not spent. Default
	// 1m.
	UnknownKindDelay time.Duration

	// UnknownKindMaxTries is how many times a job is claimed by a client
	// with no worker for its kind before it is discarded (ErrUnknownKind).
	// The count is kept in the job's errors, so it holds across clients
	// and restarts. Default 10; negative means
	// never discard: the job waits for a worker forever.
	UnknownKindMaxTries int

	// EnqueueMiddleware wraps every insert, the first outermost (see
	// EnqueueMiddleware). Default none.
	EnqueueMiddleware []EnqueueMiddleware

	// WorkMiddleware wraps the work of every job, outside the worker's own
	// WorkerOpts.Middleware, the first outermost (see WorkMiddleware).
	// Default none.
	WorkMiddleware []WorkMiddleware

	// ErrorHandler is told of every failed attempt and may decide to
	// discard the job or change its retry delay (see ErrorHandler).
	// Default none.
	ErrorHandler ErrorHandler

	// SingletonRetryDelay is how long a singleton job whose key is held by
	// another job waits before it is offered again; its attempt is not
	// spent. Default 1s.
	SingletonRetryDelay time.Duration

	// CompletedJobRetention is how long a completed job is kept after it
	// finished; then the maintenance leader deletes it. Default
	// 24h; RetainForever keeps completed jobs.
	CompletedJobRetention time.Duration

	// CancelledJobRetention is how long a cancelled job is kept after it
	// was cancelled. Default 7 days; RetainForever
	// keeps cancelled jobs.
	CancelledJobRetention time.Duration

	// DiscardedJobRetention is how long a discarded job (attempts used up)
	// is kept after it was discarded. Default 7 days;
	// RetainForever keeps discarded jobs.
	DiscardedJobRetention time.Duration

	// PruneInterval is how often the maintenance leader deletes the
	// finished jobs whose retention has passed, in batches, until none is
	// left. Default 30s.
	PruneInterval time.Duration

	// FenceLockTimeout bounds how long CheckFenceTx (and Job.CheckFenceTx)
	// waits for the fence row's lock, which an earlier holder keeps until
	// its transaction ends: one stalled after its check and before its
	// commit would block the next holder as long as it stays open. Past
	// the bound CheckFenceTx returns ErrFenceBusy. It is set as the
	// transaction's lock_timeout for the check only, and put back after.
	// Default 5s; negative means no bound (the session's own
	// lock_timeout, if any, applies).
	FenceLockTimeout time.Duration

	// ClaimBatchDelay is how long the producer of a queue with a backlog
	// waits, once a worker slot frees up, for more slots to free before it
	// claims them all in one statement (unless every slot is free first).
	// Each claim is a commit: gathering raises throughput when jobs are
	// short, and costs a short job up to this long of an idle slot. Jobs
	// that arrive in an idle queue are claimed at once whatever it is.
	// Default 5ms; negative means claim at once.
	ClaimBatchDelay time.Duration

	// ClaimAheadWindow is how much work the producer of a queue with a backlog
	// holds claimed beyond its running handlers: as many jobs as its
	// workers finished in that long at their recent rate, at most 20 per
	// worker and 1,000 (or MaxWorkers, if larger). It sizes claims by the
	// backlog rather than by free workers, so that several processes with a few workers each
	// claim in batches as large (and as cheap per job) as one process with
	// many. The cost: a job held waits its turn unseen by other clients
	// (a higher priority job arriving meanwhile waits behind up to this
	// much held work), and its lease is not renewed while it waits; one
	// that waits longer than JobLease/3 is handed back. Long jobs finish
	// slowly, so little of them is held. Capped at JobLease/6. Default
	// 250ms; negative holds only what finishes during one
	// claim's round trip.
	ClaimAheadWindow time.Duration

	// CompleteBatchSize is the most job results written in one statement.
	// Default 1000.
	CompleteBatchSize int

	// CompleteBatchDelay is how long results are gathered before they are
	// written, unless a batch fills first. While the batches written
	// release dependents (a workflow is moving: its next jobs wait for
	// these results), results are written without gathering, until a batch
	// releases none. Default 2ms.
	CompleteBatchDelay time.Duration

	// MaxArgsSize caps the encoded size of a job's args in bytes. Default
	// 1 MiB.
	MaxArgsSize int

	// MaxOutputSize caps the encoded size in bytes of what a handler
	// records with RecordOutput or RecordProgress: both live in the job's
	// row, which every claim and heartbeat of it touches. Default
	// 256 KiB.
	MaxOutputSize int

	// CancelGrace is how long Stop waits for handlers to return after it
	// cancelled them because its own context ended. Default
	// 5s.
	CancelGrace time.Duration

	// PeriodicJobs are jobs enqueued on a schedule (NewPeriodicJob) by the
	// maintenance leader, which only a started client can be. Names must
	// be unique. Client.PeriodicJobs adds and removes jobs while the
	// client runs. Default none.
	PeriodicJobs []*PeriodicJob

	// Logger receives the client's logs. Default: the warnings and errors
	// only, to slog.Default() as it is when New runs; Info and Debug
	// records are dropped, as a library should not fill its user's logs
	// unasked. Logger: slog.Default() logs them all; a logger on
	// slog.DiscardHandler logs nothing.
	Logger *slog.Logger

	// Observer, if set, is told of claims, written results, refused
	// writes, rescues and queue counts (see Observer). Default none.
	Observer *Observer
}

// withDefaults returns a copy of c with the defaults filled in, validated.
func (c *Config) withDefaults() (*Config, error) {
	if c == nil {
		c = &Config{}
	}
	out := *c
	out.Schema = cmp.Or(out.Schema, SchemaDefault)
	out.ID = cmp.Or(out.ID, defaultClientID())
	out.JobLease = cmp.Or(out.JobLease, defaultJobLease)
	out.HeartbeatInterval = cmp.Or(out.HeartbeatInterval, out.JobLease/3)
	out.RescueInterval = cmp.Or(out.RescueInterval, defaultRescueInterval)
	out.LeaderTTL = cmp.Or(out.LeaderTTL, defaultLeaderTTL)
	out.JobTimeout = cmp.Or(out.JobTimeout, defaultJobTimeout)
	out.FetchPollInterval = cmp.Or(out.FetchPollInterval, defaultFetchPollInterval)
	out.SchedulerInterval = cmp.Or(out.SchedulerInterval, defaultSchedulerInterval)
	out.UnknownKindDelay = cmp.Or(out.UnknownKindDelay, defaultUnknownKindDelay)
	out.UnknownKindMaxTries = cmp.Or(out.UnknownKindMaxTries, defaultUnknownKindMaxTries)
	// The client keeps its own lists: a caller appending to theirs later
	// changes nothing.
	out.EnqueueMiddleware = slices.Clone(out.EnqueueMiddleware)
	out.WorkMiddleware = slices.Clone(out.WorkMiddleware)
	if slices.Contains(out.EnqueueMiddleware, nil) || slices.Contains(out.WorkMiddleware, nil) {
		return nil, fmt.Errorf("%w option: nil middleware", ErrInvalid)
	}
	out.MaxArgsSize = cmp.Or(out.MaxArgsSize, defaultMaxArgsSize)
	out.MaxOutputSize = cmp.Or(out.MaxOutputSize, defaultMaxOutputSize)
	out.CancelGrace = cmp.Or(out.CancelGrace, defaultCancelGrace)
	out.ClaimBatchDelay = cmp.Or(out.ClaimBatchDelay, defaultClaimBatchDelay)
	out.ClaimAheadWindow = cmp.Or(out.ClaimAheadWindow, defaultClaimAhead)
	out.CompleteBatchSize = cmp.Or(out.CompleteBatchSize, defaultCompleteBatchSize)
	out.CompleteBatchDelay = cmp.Or(out.CompleteBatchDelay, defaultCompleteBatchDelay)
	out.SingletonRetryDelay = cmp.Or(out.SingletonRetryDelay, defaultSingletonRetryDelay)
	out.CompletedJobRetention = cmp.Or(out.CompletedJobRetention, defaultCompletedJobRetention)
	out.CancelledJobRetention = cmp.Or(out.CancelledJobRetention, defaultCancelledJobRetention)
	out.DiscardedJobRetention = cmp.Or(out.DiscardedJobRetention, defaultDiscardedJobRetention)
	out.PruneInterval = cmp.Or(out.PruneInterval, defaultPruneInterval)
	out.FenceLockTimeout = cmp.Or(out.FenceLockTimeout, pglock.DefaultFenceLockTimeout)
	if out.RetryPolicy == nil {
		out.RetryPolicy = defaultRetryPolicy
	}
	if out.Logger == nil {
		out.Logger = warnlog.Default()
	}
	// The client keeps its own copy, never nil, so its loops test each
	// function alone.
	obs := Observer{}
	if out.Observer != nil {
		obs = *out.Observer
	}
	obs.QueuesInterval = cmp.Or(obs.QueuesInterval, defaultObserverQueuesInterval)
	out.Observer = &obs
	if err := sqlschema.Validate(out.Schema); err != nil {
		return nil, err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"JobLease", out.JobLease}, {"HeartbeatInterval", out.HeartbeatInterval}, {"RescueInterval", out.RescueInterval}, {"FetchPollInterval", out.FetchPollInterval}, {"SchedulerInterval", out.SchedulerInterval}, {"UnknownKindDelay", out.UnknownKindDelay}, {"CancelGrace", out.CancelGrace}, {"LeaderTTL", out.LeaderTTL}, {"SingletonRetryDelay", out.SingletonRetryDelay}, {"Observer.QueuesInterval", out.Observer.QueuesInterval}} {
		if d.v < 0 {
			return nil, fmt.Errorf("%w option: %s must not be negative, got %s", ErrInvalid, d.name, d.v)
		}
	}
	if out.JobLease < time.Second {
		return nil, fmt.Errorf("%w option: JobLease must be at least 1s, got %s", ErrInvalid, out.JobLease)
	}
	if out.HeartbeatInterval >= out.JobLease {
		return nil, fmt.Errorf("%w option: HeartbeatInterval %s must be shorter than JobLease %s", ErrInvalid, out.HeartbeatInterval, out.JobLease)
	}
	if out.CompleteBatchSize < 1 || out.CompleteBatchDelay < 0 {
		return nil, fmt.Errorf("%w option: CompleteBatchSize must be at least 1 and CompleteBatchDelay not negative", ErrInvalid)
	}
	for _, r := range []struct {
		name string
		v    time.Duration
	}{{"CompletedJobRetention", out.CompletedJobRetention}, {"CancelledJobRetention", out.CancelledJobRetention}, {"DiscardedJobRetention", out.DiscardedJobRetention}} {
		if r.v < 0 && r.v != RetainForever {
			return nil, fmt.Errorf("%w option: %s must be positive or RetainForever, got %s", ErrInvalid, r.name, r.v)
		}
	}
	if out.PruneInterval < 0 {
		return nil, fmt.Errorf("%w option: PruneInterval must not be negative, got %s", ErrInvalid, out.PruneInterval)
	}
	if out.MaxOutputSize < 0 {
		return nil, fmt.Errorf("%w option: MaxOutputSize must not be negative, got %d", ErrInvalid, out.MaxOutputSize)
	}
	if out.MaxArgsSize < 0 {
		return nil, fmt.Errorf("%w option: MaxArgsSize must not be negative, got %d", ErrInvalid, out.MaxArgsSize)
	}
	queues := make(map[string]QueueConfig, len(out.Queues))
	for name, qc := range out.Queues {
		if err := enqueue.ValidateQueue(name); err != nil {
			return nil, err
		}
		if qc.MaxWorkers < 1 {
			return nil, fmt.Errorf("%w option: queue %q: MaxWorkers must be at least 1, got %d", ErrInvalid, name, qc.MaxWorkers)
		}
		queues[name] = qc
	}
	out.Queues = queues
	return &out, nil
}

func defaultClientID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", cmp.Or(host, "host"), os.Getpid(), hex.EncodeToString(b[:]))
}
