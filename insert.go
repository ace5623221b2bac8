package pgqueue

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// InsertOpts are the options of one job. The zero value is a job on
// DefaultQueue, priority 0, due now, with DefaultMaxAttempts attempts.
type InsertOpts struct {
	// Queue is the queue to insert into. Default DefaultQueue. A queue name
	// is 1 to 63 bytes of lower-case letters, digits, '_', '-' and '.',
	// starting with a letter or digit (it becomes part of NOTIFY payloads
	// and metric labels).
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
	// Unique, when set, makes the job unique: it is not inserted while an
	// equal job exists (see UniqueOpts).
	Unique *UniqueOpts
}

// EnqueueResult is what Enqueue did: the job it inserted, or, for a unique
// job, the existing equal job.
type EnqueueResult struct {
	// JobRow is the job inserted, or the existing job when Duplicate.
	*JobRow
	// Duplicate is true when the job was unique and an equal job existed
	// already: nothing was inserted and JobRow is that job.
	Duplicate bool
}

// EnqueueManyResult is what EnqueueMany did.
type EnqueueManyResult struct {
	// Inserted is how many jobs were inserted.
	Inserted int64
	// Duplicates are the positions in params, ascending, of the unique
	// jobs not inserted because an equal job existed: in the table, or
	// earlier in params.
	Duplicates []int
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
	unique      *uniqueKey // nil unless InsertOpts.Unique
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
	if opts.Unique != nil {
		if job.unique, err = newUniqueKey(opts.Unique, kind, queue, encoded); err != nil {
			return nil, err
		}
	}
	return job, nil
}

// Enqueue inserts one job and returns its row. The job is committed when
// Enqueue returns; use EnqueueTx to make it part of your own transaction.
// A unique job (InsertOpts.Unique) that has an equal job already is not
// inserted: the result is the existing job, with Duplicate set.
func (c *Client) Enqueue(ctx context.Context, args JobArgs, opts *InsertOpts) (*EnqueueResult, error) {
	res, err := c.insert(ctx, c.pool, args, opts)
	if err == nil && !res.Duplicate {
		c.wake(res.Queue)
	}
	return res, err
}

// EnqueueTx inserts one job inside tx: the job exists only if tx commits.
// See Enqueue for unique jobs.
func (c *Client) EnqueueTx(ctx context.Context, tx pgx.Tx, args JobArgs, opts *InsertOpts) (*EnqueueResult, error) {
	return c.insert(ctx, tx, args, opts)
}

type queryer interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

func (c *Client) insert(ctx context.Context, db queryer, args JobArgs, opts *InsertOpts) (*EnqueueResult, error) {
	if err := ctxError(ctx, "enqueue"); err != nil {
		return nil, err
	}
	job, err := c.encode(args, opts)
	if err != nil {
		return nil, err
	}
	if job.unique != nil {
		return c.insertUnique(ctx, db, job)
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
	return &EnqueueResult{JobRow: row}, nil
}

// EnqueueMany inserts jobs, all or none, and says how many it inserted.
// Batches of 64 jobs or more without unique jobs go through COPY; there,
// jobs with a RunAt are written as scheduled and made available by the
// scheduler once due, so no client clock is ever compared with the
// database's. Unique jobs that have an equal job (in the table, or earlier
// in params) are skipped, and the result lists them.
func (c *Client) EnqueueMany(ctx context.Context, params []EnqueueParams) (*EnqueueManyResult, error) {
	if err := ctxError(ctx, "enqueue many"); err != nil {
		return nil, err
	}
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return nil, dbError("enqueue many: begin", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	res, err := c.EnqueueManyTx(ctx, tx, params)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, dbError("enqueue many: commit", err)
	}
	for queue := range queuesOf(params) {
		c.wake(queue)
	}
	return res, nil
}

// copyThreshold is the batch size from which EnqueueMany uses COPY;
// smaller batches are one INSERT statement, which costs fewer round trips.
const copyThreshold = 64

// EnqueueManyTx inserts jobs inside tx: they exist only if tx commits.
// See EnqueueMany.
func (c *Client) EnqueueManyTx(ctx context.Context, tx pgx.Tx, params []EnqueueParams) (*EnqueueManyResult, error) {
	if err := ctxError(ctx, "enqueue many"); err != nil {
		return nil, err
	}
	unique := slices.ContainsFunc(params, func(p EnqueueParams) bool { return p.Opts != nil && p.Opts.Unique != nil })
	switch {
	case len(params) == 0:
		return &EnqueueManyResult{}, nil
	case len(params) >= copyThreshold && !unique:
		n, err := c.copyMany(ctx, tx, params)
		if err != nil {
			return nil, err
		}
		return &EnqueueManyResult{Inserted: n}, nil
	}
	jobs := make([]*encodedJob, len(params))
	for i, p := range params {
		job, err := c.encode(p.Args, p.Opts)
		if err != nil {
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
		jobs[i] = job
	}
	if unique {
		return c.insertManyUnique(ctx, tx, jobs)
	}
	n, err := c.insertMany(ctx, tx, jobs)
	if err != nil {
		return nil, err
	}
	return &EnqueueManyResult{Inserted: n}, nil
}

// insertMany writes a small batch, and its notifications, in one round trip.
func (c *Client) insertMany(ctx context.Context, tx pgx.Tx, jobs []*encodedJob) (int64, error) {
	cols, err := newJobColumns(jobs)
	if err != nil {
		return 0, err
	}
	batch := &pgx.Batch{}
	batch.Queue(c.q.insertMany, cols.args()...)
	batch.Queue(c.q.notifyDue, c.channel, cols.queues, cols.runAts)
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

// jobColumns are a batch's jobs as the column arrays of
// sql/insert_many.sql: one array per column, tags as JSON (a SQL array
// cannot hold rows of different lengths).
type jobColumns struct {
	queues, kinds       []string
	singletons          []*string
	encArgs, tags, meta [][]byte
	priorities          []int16
	maxAttempts         []int32
	runAts              []*time.Time
}

func newJobColumns(jobs []*encodedJob) (*jobColumns, error) {
	n := len(jobs)
	c := &jobColumns{
		queues: make([]string, n), kinds: make([]string, n), singletons: make([]*string, n),
		encArgs: make([][]byte, n), tags: make([][]byte, n), meta: make([][]byte, n),
		priorities: make([]int16, n), maxAttempts: make([]int32, n), runAts: make([]*time.Time, n),
	}
	for i, j := range jobs {
		t, err := json.Marshal(j.tags)
		if err != nil {
			return nil, fmt.Errorf("%w: tags: %w", ErrInvalidArgs, err)
		}
		c.queues[i], c.kinds[i], c.singletons[i] = j.queue, j.kind, j.singleton
		c.encArgs[i], c.tags[i], c.meta[i] = j.args, t, j.meta
		c.priorities[i], c.maxAttempts[i], c.runAts[i] = j.priority, int32(j.maxAttempts), j.runAt
	}
	return c, nil
}

// args are the statement's first nine arguments, in its order.
func (c *jobColumns) args() []any {
	return []any{c.queues, c.kinds, c.encArgs, c.priorities, c.maxAttempts, c.tags, c.meta, c.singletons, c.runAts}
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
