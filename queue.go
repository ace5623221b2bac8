package pgqueue

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"os"
	"regexp"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/pglock"
)

// QueuePattern is what a queue name must match: 1 to 63 bytes of lower-case
// letters, digits, '_', '-' and '.', starting with a letter or digit. The
// limit keeps a queue name usable inside a NOTIFY channel name.
var QueuePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// Defaults of Config and InsertOpts.
const (
	// DefaultQueue is the queue of a job inserted without one.
	DefaultQueue = "default"
	// DefaultMaxAttempts is the MaxAttempts of a job inserted without one.
	DefaultMaxAttempts = 25
	// DefaultMaxArgsSize is Config.MaxArgsSize's default: 1 MiB.
	DefaultMaxArgsSize = 1 << 20
	// DefaultJobLease is Config.JobLease's default.
	DefaultJobLease = 30 * time.Second
	// DefaultJobTimeout is Config.JobTimeout's default.
	DefaultJobTimeout = time.Minute
	// DefaultFetchPollInterval is Config.FetchPollInterval's default.
	DefaultFetchPollInterval = time.Second
	// DefaultSchedulerInterval is Config.SchedulerInterval's default.
	DefaultSchedulerInterval = time.Second
	// DefaultUnknownKindDelay is Config.UnknownKindDelay's default.
	DefaultUnknownKindDelay = time.Minute
	// DefaultLeaderTTL is Config.LeaderTTL's default.
	DefaultLeaderTTL = 10 * time.Second
	// DefaultRescueInterval is Config.RescueInterval's default.
	DefaultRescueInterval = 5 * time.Second
	// DefaultClaimBatchDelay is Config.ClaimBatchDelay's default.
	DefaultClaimBatchDelay = 5 * time.Millisecond
	// DefaultCompleteBatchSize is Config.CompleteBatchSize's default.
	DefaultCompleteBatchSize = 1000
	// DefaultCompleteBatchDelay is Config.CompleteBatchDelay's default.
	DefaultCompleteBatchDelay = 2 * time.Millisecond
	// DefaultCancelGrace is Config.CancelGrace's default.
	DefaultCancelGrace = 5 * time.Second
)

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
	// with the same name. Default DefaultSchema. Must match SchemaPattern.
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

	// Lease is how long a claim is valid: a claimed job's lease_until is
	// now() + JobLease by the database clock. Default DefaultJobLease.
	JobLease time.Duration

	// HeartbeatInterval is how often the leases of running jobs are
	// renewed. Default Lease/3.
	HeartbeatInterval time.Duration

	// RescueInterval is how often running jobs whose lease expired are put
	// back (to be retried) or discarded (attempts used up). Default
	// DefaultRescueInterval.
	RescueInterval time.Duration

	// JobTimeout bounds each job's handler, unless its kind sets its own in
	// WorkerOpts. Default DefaultJobTimeout; negative means no limit.
	JobTimeout time.Duration

	// FetchPollInterval is how often the client asks the database, in one
	// query for all its queues, whether jobs wait: the fallback for missed
	// notifications, so a job waits at most about this long for a free
	// worker that missed its notification. Default
	// DefaultFetchPollInterval.
	FetchPollInterval time.Duration

	// SchedulerInterval is how often due scheduled jobs are made available,
	// so a job starts within about this long of its run_at. Default
	// DefaultSchedulerInterval.
	SchedulerInterval time.Duration

	// RetryPolicy computes the delay before a failed job's next attempt.
	// Default: DefaultRetryPolicy.
	RetryPolicy RetryPolicy

	// LeaderTTL is the lease of the maintenance leader: one client per
	// schema runs the scheduler and the rescuer at a time, and when it dies
	// another takes over within about this long. Default DefaultLeaderTTL.
	LeaderTTL time.Duration

	// UnknownKindDelay is how long a job whose kind has no worker waits
	// before it is offered again. Its attempt is not spent. Default
	// DefaultUnknownKindDelay.
	UnknownKindDelay time.Duration

	// SingletonRetryDelay is how long a singleton job whose key is held by
	// another job waits before it is offered again; its attempt is not
	// spent. Default DefaultSingletonRetryDelay.
	SingletonRetryDelay time.Duration

	// ClaimBatchDelay is how long the producer of a queue with a backlog
	// waits, once a worker slot frees up, for more slots to free before it
	// claims them all in one statement (unless every slot is free first).
	// Each claim is a commit: gathering raises throughput when jobs are
	// short, and costs a short job up to this long of an idle slot. Jobs
	// that arrive in an idle queue are claimed at once whatever it is.
	// Default DefaultClaimBatchDelay; negative means claim at once.
	ClaimBatchDelay time.Duration

	// CompleteBatchSize is the most job results written in one statement.
	// Default DefaultCompleteBatchSize.
	CompleteBatchSize int

	// CompleteBatchDelay is how long results are gathered before they are
	// written, unless a batch fills first. Default DefaultCompleteBatchDelay.
	CompleteBatchDelay time.Duration

	// MaxArgsSize caps the encoded size of a job's args in bytes. Default
	// DefaultMaxArgsSize.
	MaxArgsSize int

	// CancelGrace is how long Stop waits for handlers to return after it
	// cancelled them because its own context ended. Default
	// DefaultCancelGrace.
	CancelGrace time.Duration

	// Logger receives the client's logs. Default: slog.Default().
	Logger *slog.Logger
}

// withDefaults returns a copy of c with the defaults filled in, validated.
func (c *Config) withDefaults() (*Config, error) {
	if c == nil {
		c = &Config{}
	}
	out := *c
	out.Schema = cmp.Or(out.Schema, DefaultSchema)
	out.ID = cmp.Or(out.ID, defaultClientID())
	out.JobLease = cmp.Or(out.JobLease, DefaultJobLease)
	out.HeartbeatInterval = cmp.Or(out.HeartbeatInterval, out.JobLease/3)
	out.RescueInterval = cmp.Or(out.RescueInterval, DefaultRescueInterval)
	out.LeaderTTL = cmp.Or(out.LeaderTTL, DefaultLeaderTTL)
	out.JobTimeout = cmp.Or(out.JobTimeout, DefaultJobTimeout)
	out.FetchPollInterval = cmp.Or(out.FetchPollInterval, DefaultFetchPollInterval)
	out.SchedulerInterval = cmp.Or(out.SchedulerInterval, DefaultSchedulerInterval)
	out.UnknownKindDelay = cmp.Or(out.UnknownKindDelay, DefaultUnknownKindDelay)
	out.MaxArgsSize = cmp.Or(out.MaxArgsSize, DefaultMaxArgsSize)
	out.CancelGrace = cmp.Or(out.CancelGrace, DefaultCancelGrace)
	out.ClaimBatchDelay = cmp.Or(out.ClaimBatchDelay, DefaultClaimBatchDelay)
	out.CompleteBatchSize = cmp.Or(out.CompleteBatchSize, DefaultCompleteBatchSize)
	out.CompleteBatchDelay = cmp.Or(out.CompleteBatchDelay, DefaultCompleteBatchDelay)
	out.SingletonRetryDelay = cmp.Or(out.SingletonRetryDelay, DefaultSingletonRetryDelay)
	if out.RetryPolicy == nil {
		out.RetryPolicy = DefaultRetryPolicy
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if err := validateSchema(out.Schema); err != nil {
		return nil, err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"JobLease", out.JobLease}, {"HeartbeatInterval", out.HeartbeatInterval}, {"RescueInterval", out.RescueInterval}, {"FetchPollInterval", out.FetchPollInterval}, {"SchedulerInterval", out.SchedulerInterval}, {"UnknownKindDelay", out.UnknownKindDelay}, {"CancelGrace", out.CancelGrace}} {
		if d.v < 0 {
			return nil, fmt.Errorf("%w: %s must not be negative, got %s", ErrInvalidOption, d.name, d.v)
		}
	}
	if out.JobLease < time.Second {
		return nil, fmt.Errorf("%w: JobLease must be at least 1s, got %s", ErrInvalidOption, out.JobLease)
	}
	if out.HeartbeatInterval >= out.JobLease {
		return nil, fmt.Errorf("%w: HeartbeatInterval %s must be shorter than JobLease %s", ErrInvalidOption, out.HeartbeatInterval, out.JobLease)
	}
	if out.CompleteBatchSize < 1 || out.CompleteBatchDelay < 0 {
		return nil, fmt.Errorf("%w: CompleteBatchSize must be at least 1 and CompleteBatchDelay not negative", ErrInvalidOption)
	}
	if out.MaxArgsSize < 0 {
		return nil, fmt.Errorf("%w: MaxArgsSize must not be negative, got %d", ErrInvalidOption, out.MaxArgsSize)
	}
	queues := make(map[string]QueueConfig, len(out.Queues))
	for name, qc := range out.Queues {
		if err := validateQueue(name); err != nil {
			return nil, err
		}
		if qc.MaxWorkers < 1 {
			return nil, fmt.Errorf("%w: queue %q: MaxWorkers must be at least 1, got %d", ErrInvalidOption, name, qc.MaxWorkers)
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

func validateQueue(name string) error {
	if !QueuePattern.MatchString(name) {
		return fmt.Errorf("%w: %q does not match %s", ErrInvalidQueue, name, QueuePattern)
	}
	return nil
}

// Client enqueues jobs and, once started, works the configured queues.
// It is safe for concurrent use.
type Client struct {
	pool   *pgxpool.Pool
	config *Config
	q      *queries
	locks  *pglock.Locker
	log    *slog.Logger

	// channel is the NOTIFY channel of the schema's inserts; the payload
	// is the queue name.
	channel string

	testHooks testHooks

	mu      sync.Mutex
	running *runState // nil unless started
}

// New returns a client on pool. A nil config means defaults (see Config).
// New does not touch the database; the schema must have been created with
// Migrate.
func New(pool *pgxpool.Pool, config *Config) (*Client, error) {
	if pool == nil {
		return nil, ErrNilPool
	}
	cfg, err := config.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(cfg.Queues) > 0 && cfg.Workers == nil {
		return nil, ErrNoWorkers
	}
	q, err := loadQueries(cfg.Schema)
	if err != nil {
		return nil, err
	}
	locks, err := pglock.New(pool, &pglock.Config{Schema: cfg.Schema, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	return &Client{pool: pool, config: cfg, q: q, locks: locks, log: cfg.Logger, channel: notifyChannel(cfg.Schema)}, nil
}

// ID returns the client's ID, as stored in the worker_id of the jobs it
// claims.
func (c *Client) ID() string { return c.config.ID }

// InsertOpts are the options of one job. The zero value is a job on
// DefaultQueue, priority 0, due now, with DefaultMaxAttempts attempts.
type InsertOpts struct {
	// Queue is the queue to insert into. Default DefaultQueue; must match
	// QueuePattern.
	Queue string
	// Priority orders jobs within a queue: lower runs first. Default 0.
	Priority int16
	// RunAt delays the job until then. Zero: due now, by the database clock.
	RunAt time.Time
	// MaxAttempts is how many attempts a failing job gets before it is
	// discarded. Default DefaultMaxAttempts.
	MaxAttempts int
	// Tags are free labels kept with the job.
	Tags []string
	// Meta is free data kept with the job, encoded as JSON.
	Meta map[string]any
	// SingletonKey, when set, makes the job a singleton: at most one job
	// with this key runs at a time across all processes. See
	// WorkerOpts.SingletonMode.
	SingletonKey string
}

// EnqueueParams is one job of EnqueueMany.
type EnqueueParams struct {
	// Args are the job's args.
	Args JobArgs
	// Opts are its options; nil means defaults.
	Opts *InsertOpts
}

// encodedJob is a validated job ready to be written.
type encodedJob struct {
	queue       string
	kind        string
	args        []byte
	priority    int16
	maxAttempts int
	runAt       *time.Time
	tags        []string
	meta        []byte
	singleton   *string
}

func (c *Client) encode(args JobArgs, opts *InsertOpts) (*encodedJob, error) {
	return c.encodeWith(args, opts, "")
}

// encodeWith is encode, trusting that validQueue, if not empty, is a valid
// queue name: a batch passes the queue of the job before, so a run of jobs
// for one queue checks its name once.
func (c *Client) encodeWith(args JobArgs, opts *InsertOpts, validQueue string) (*encodedJob, error) {
	if args == nil {
		return nil, fmt.Errorf("%w: nil args", ErrInvalidArgs)
	}
	kind := args.Kind()
	if err := validateKind(kind); err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &InsertOpts{}
	}
	queue := cmp.Or(opts.Queue, DefaultQueue)
	if queue != validQueue {
		if err := validateQueue(queue); err != nil {
			return nil, fmt.Errorf("enqueue %s: %w", kind, err)
		}
	}
	if opts.MaxAttempts < 0 || opts.MaxAttempts > math.MaxInt32 {
		return nil, fmt.Errorf("%w: enqueue %s: MaxAttempts %d out of range", ErrInvalidOption, kind, opts.MaxAttempts)
	}
	encoded, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("%w: enqueue %s: %w", ErrInvalidArgs, kind, err)
	}
	if len(encoded) > c.config.MaxArgsSize {
		return nil, fmt.Errorf("%w: enqueue %s: %d bytes, limit %d", ErrArgsTooLarge, kind, len(encoded), c.config.MaxArgsSize)
	}
	meta := []byte("{}")
	if opts.Meta != nil {
		if meta, err = json.Marshal(opts.Meta); err != nil {
			return nil, fmt.Errorf("%w: enqueue %s: meta: %w", ErrInvalidArgs, kind, err)
		}
	}
	job := &encodedJob{
		queue:       queue,
		kind:        kind,
		args:        encoded,
		priority:    opts.Priority,
		maxAttempts: cmp.Or(opts.MaxAttempts, DefaultMaxAttempts),
		tags:        opts.Tags,
		meta:        meta,
	}
	if job.tags == nil {
		job.tags = []string{}
	}
	if opts.SingletonKey != "" {
		key := opts.SingletonKey
		job.singleton = &key
	}
	if !opts.RunAt.IsZero() {
		runAt := opts.RunAt
		job.runAt = &runAt
	}
	return job, nil
}

func validateKind(kind string) error {
	if kind == "" || len(kind) > 255 {
		return fmt.Errorf("%w: %q", ErrInvalidKind, kind)
	}
	return nil
}

// Enqueue inserts one job and returns its row. The job is committed when
// Enqueue returns; use EnqueueTx to make it part of your own transaction.
func (c *Client) Enqueue(ctx context.Context, args JobArgs, opts *InsertOpts) (*JobRow, error) {
	row, err := c.insert(ctx, c.pool, args, opts)
	if err == nil {
		c.wake(row.Queue)
	}
	return row, err
}

// EnqueueTx inserts one job inside tx: the job exists only if tx commits.
func (c *Client) EnqueueTx(ctx context.Context, tx pgx.Tx, args JobArgs, opts *InsertOpts) (*JobRow, error) {
	return c.insert(ctx, tx, args, opts)
}

type queryer interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

func (c *Client) insert(ctx context.Context, db queryer, args JobArgs, opts *InsertOpts) (*JobRow, error) {
	if err := ctxError(ctx, "enqueue"); err != nil {
		return nil, err
	}
	job, err := c.encode(args, opts)
	if err != nil {
		return nil, err
	}
	// One round trip; the statements share the implicit transaction of the
	// batch (or the caller's), so the notification goes out at commit.
	batch := &pgx.Batch{}
	batch.Queue(c.q.insert, job.queue, job.kind, job.args, job.priority, job.maxAttempts, job.runAt, job.tags, job.meta, job.singleton)
	batch.Queue(c.q.notify, c.channel, job.queue, job.runAt)
	results := db.SendBatch(ctx, batch)
	rows, err := results.Query()
	if err != nil {
		_ = results.Close()
		return nil, dbError("enqueue "+job.kind, err)
	}
	row, err := pgx.CollectExactlyOneRow(rows, scanJobRow)
	if err != nil {
		_ = results.Close()
		return nil, dbError("enqueue "+job.kind, err)
	}
	if err := results.Close(); err != nil {
		return nil, dbError("enqueue "+job.kind, err)
	}
	return row, nil
}

// EnqueueMany inserts jobs, all or none, and returns how many it inserted.
// Batches of CopyThreshold jobs or more go through COPY; there, jobs with a
// RunAt are written as scheduled and made available by the scheduler once
// due, so no client clock is ever compared with the database's.
func (c *Client) EnqueueMany(ctx context.Context, params []EnqueueParams) (int64, error) {
	if err := ctxError(ctx, "enqueue many"); err != nil {
		return 0, err
	}
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return 0, dbError("enqueue many: begin", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	n, err := c.EnqueueManyTx(ctx, tx, params)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, dbError("enqueue many: commit", err)
	}
	for queue := range queuesOf(params) {
		c.wake(queue)
	}
	return n, nil
}

// CopyThreshold is the batch size from which EnqueueMany uses COPY;
// smaller batches are one INSERT statement, which costs fewer round trips.
const CopyThreshold = 64

// EnqueueManyTx inserts jobs inside tx: they exist only if tx commits.
// Batches of CopyThreshold jobs or more go through COPY. See EnqueueMany.
func (c *Client) EnqueueManyTx(ctx context.Context, tx pgx.Tx, params []EnqueueParams) (int64, error) {
	if err := ctxError(ctx, "enqueue many"); err != nil {
		return 0, err
	}
	switch {
	case len(params) == 0:
		return 0, nil
	case len(params) >= CopyThreshold:
		return c.copyMany(ctx, tx, params)
	}
	jobs := make([]*encodedJob, len(params))
	for i, p := range params {
		job, err := c.encode(p.Args, p.Opts)
		if err != nil {
			return 0, fmt.Errorf("job %d: %w", i, err)
		}
		jobs[i] = job
	}
	return c.insertMany(ctx, tx, jobs)
}

// insertMany writes a small batch, and its notifications, in one round trip.
func (c *Client) insertMany(ctx context.Context, tx pgx.Tx, jobs []*encodedJob) (int64, error) {
	n := len(jobs)
	queues, kinds, singletons := make([]string, n), make([]string, n), make([]*string, n)
	args, tags, metas := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	priorities, maxAttempts := make([]int16, n), make([]int32, n)
	runAts := make([]*time.Time, n)
	for i, j := range jobs {
		t, err := json.Marshal(j.tags)
		if err != nil {
			return 0, fmt.Errorf("%w: tags: %w", ErrInvalidArgs, err)
		}
		queues[i], kinds[i], singletons[i] = j.queue, j.kind, j.singleton
		args[i], tags[i], metas[i] = j.args, t, j.meta
		priorities[i], maxAttempts[i], runAts[i] = j.priority, int32(j.maxAttempts), j.runAt
	}
	batch := &pgx.Batch{}
	batch.Queue(c.q.insertMany, queues, kinds, args, priorities, maxAttempts, tags, metas, singletons, runAts)
	batch.Queue(c.q.notifyDue, c.channel, queues, runAts)
	results := tx.SendBatch(ctx, batch)
	tag, err := results.Exec()
	if err == nil {
		_, err = results.Exec()
	}
	if cerr := results.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, dbError("enqueue many", err)
	}
	return tag.RowsAffected(), nil
}

// notifyQueues sends one notification per queue in due, however many
// jobs each got: delivered at commit.
func (c *Client) notifyQueues(ctx context.Context, tx pgx.Tx, due map[string]bool) error {
	if len(due) == 0 {
		return nil
	}
	queues := make([]string, 0, len(due))
	for q := range due {
		queues = append(queues, q)
	}
	if _, err := tx.Exec(ctx, c.q.notifyQueues, c.channel, queues); err != nil {
		return dbError("enqueue many: notify", err)
	}
	return nil
}

func queuesOf(params []EnqueueParams) map[string]struct{} {
	out := map[string]struct{}{}
	for _, p := range params {
		q := DefaultQueue
		if p.Opts != nil && p.Opts.Queue != "" {
			q = p.Opts.Queue
		}
		out[q] = struct{}{}
	}
	return out
}

// scanJobRow reads a job row as returned by claim.sql and insert.sql, whose
// RETURNING lists must keep this order.
func scanJobRow(row pgx.CollectableRow) (*JobRow, error) {
	var s jobScanner
	return s.scan(row)
}

// collectJobRows reads all the rows of a claim with one jobScanner.
func collectJobRows(rows pgx.Rows) ([]*JobRow, error) {
	defer rows.Close()
	var s jobScanner
	var out []*JobRow
	for rows.Next() {
		j, err := s.scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// jobScanner scans job rows. Reused across the rows of a claim, its
// scratch values and destination list cost their allocations once per
// claim instead of once per row.
type jobScanner struct {
	state                                string
	fence                                pgtype.Int8
	leaseUntil, attemptedAt, finalizedAt pgtype.Timestamptz
	workerID, singleton                  pgtype.Text
	errs                                 []byte
	dest                                 []any
}

func (s *jobScanner) scan(row pgx.CollectableRow) (*JobRow, error) {
	j := &JobRow{}
	s.dest = append(s.dest[:0], &j.ID, &j.Queue, &j.Kind, &j.EncodedArgs, &j.Priority, &s.state, &j.Attempt, &j.MaxAttempts,
		&j.RunAt, &s.fence, &s.leaseUntil, &s.workerID, &s.errs, &j.Tags, &j.Meta,
		&j.CreatedAt, &s.attemptedAt, &s.finalizedAt, &s.singleton)
	if err := row.Scan(s.dest...); err != nil {
		return nil, err
	}
	j.State = JobState(s.state)
	j.Fence = s.fence.Int64
	j.LeaseUntil, j.AttemptedAt, j.FinalizedAt = s.leaseUntil.Time, s.attemptedAt.Time, s.finalizedAt.Time
	j.WorkerID, j.SingletonKey = s.workerID.String, s.singleton.String
	if string(s.errs) == "[]" { // most rows: skip the decoder
		return j, nil
	}
	if err := json.Unmarshal(s.errs, &j.Errors); err != nil {
		return nil, fmt.Errorf("decode errors of job %d: %w", j.ID, err)
	}
	return j, nil
}

// testHooks let tests force races; all nil outside tests.
type testHooks struct {
	// beforeRescueWrite runs between reading expired jobs and putting them
	// back.
	beforeRescueWrite func(ids []int64)
	// finishQuery, when set, replaces the query that records job results,
	// so tests can lose its reply.
	finishQuery func(ctx context.Context, query string, args ...any) (pgx.Rows, error)
	// claimAged, when set, makes every claim look this much older when its
	// jobs are dispatched.
	claimAged time.Duration
}

// notifyChannel is the NOTIFY channel of a schema's inserts: the schema
// name and "_jobs", kept within PostgreSQL's 63-byte identifier limit.
func notifyChannel(schema string) string {
	const suffix = "_jobs"
	if len(schema)+len(suffix) <= 63 {
		return schema + suffix
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(schema))
	return fmt.Sprintf("%s_%08x%s", schema[:63-len(suffix)-9], h.Sum32(), suffix)
}
