package pgqueue

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/jobsql"
)

// EnqueueOpts are the options of one job. The zero value is a job on
// DefaultQueue, priority 0, due now, with 25 attempts.
type EnqueueOpts struct {
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
	// discarded. Default 25.
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
	// Enqueued is how many jobs were inserted.
	Enqueued int64
	// Duplicates are the positions in params, ascending, of the unique
	// jobs not inserted because an equal job existed: in the table, or
	// earlier in params.
	Duplicates []int
}

// EnqueueManyParams is one job of EnqueueMany.
type EnqueueManyParams struct {
	// Args are the job's args.
	Args JobArgs
	// Opts are its options; nil means defaults.
	Opts *EnqueueOpts
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

// JobArgsWithEnqueueOpts is implemented by args types that declare the
// default insert options of their kind. Every insert of such args (Enqueue,
// EnqueueMany and their Tx twins, periodic runs) starts from these
// defaults, and the caller's InsertOpts override them field by field:
// each non-zero field of the caller's (a non-empty Queue or SingletonKey,
// a non-zero Priority, RunAt or MaxAttempts, non-nil Tags or Unique)
// wins. Meta is merged key by key, the caller's keys winning. So a
// caller cannot set a field back to zero (Priority 0 under a default of
// 2): give such a kind no default for that field.
type JobArgsWithEnqueueOpts interface {
	JobArgs
	// EnqueueOpts returns the kind's defaults; called on each insert.
	EnqueueOpts() EnqueueOpts
}

// resolveOpts returns opts over the defaults args declares, if any: opts
// itself when there are none.
func resolveOpts(args JobArgs, opts *EnqueueOpts) *EnqueueOpts {
	d, ok := args.(JobArgsWithEnqueueOpts)
	if !ok {
		return opts
	}
	o := d.EnqueueOpts()
	if opts == nil {
		return &o
	}
	o.Queue = cmp.Or(opts.Queue, o.Queue)
	o.Priority = cmp.Or(opts.Priority, o.Priority)
	if !opts.RunAt.IsZero() {
		o.RunAt = opts.RunAt
	}
	o.MaxAttempts = cmp.Or(opts.MaxAttempts, o.MaxAttempts)
	if opts.Tags != nil {
		o.Tags = opts.Tags
	}
	if len(o.Meta) == 0 {
		o.Meta = opts.Meta
	} else if len(opts.Meta) > 0 {
		meta := maps.Clone(o.Meta)
		maps.Copy(meta, opts.Meta)
		o.Meta = meta
	}
	o.SingletonKey = cmp.Or(opts.SingletonKey, o.SingletonKey)
	if opts.Unique != nil {
		o.Unique = opts.Unique
	}
	return &o
}

// resolveAll returns params with every job's options resolved
// (resolveOpts): params itself when no args type declares defaults.
func resolveAll(params []EnqueueManyParams) []EnqueueManyParams {
	i := slices.IndexFunc(params, func(p EnqueueManyParams) bool {
		_, ok := p.Args.(JobArgsWithEnqueueOpts)
		return ok
	})
	if i < 0 {
		return params
	}
	out := slices.Clone(params)
	for ; i < len(out); i++ {
		out[i].Opts = resolveOpts(out[i].Args, out[i].Opts)
	}
	return out
}

// newInsertParams fills p with one job: args encoded, opts (resolved
// already) applied.
func (c *Client) newInsertParams(args JobArgs, opts *EnqueueOpts, p *EnqueueParams) error {
	if isNilValue(args) { // a typed nil pointer's Kind() may panic
		return fmt.Errorf("%w job args: nil args (%T)", ErrInvalid, args)
	}
	kind := args.Kind()
	if err := validateKind(kind); err != nil {
		return err
	}
	if opts == nil {
		opts = &EnqueueOpts{}
	}
	encoded, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("%w job args: enqueue %s: %w", ErrInvalid, kind, err)
	}
	*p = EnqueueParams{
		Args: args, Kind: kind, EncodedArgs: encoded,
		Queue: cmp.Or(opts.Queue, DefaultQueue), Priority: opts.Priority, RunAt: opts.RunAt, MaxAttempts: opts.MaxAttempts,
		Tags: opts.Tags, Meta: opts.Meta, SingletonKey: opts.SingletonKey, Unique: opts.Unique,
	}
	return nil
}

// encode validates and encodes one job, its args type's defaults under
// opts.
func (c *Client) encode(args JobArgs, opts *EnqueueOpts) (*encodedJob, error) {
	return c.encodeResolved(args, resolveOpts(args, opts), "")
}

// encodeResolved is encode for opts resolved already, trusting that
// validQueue, if not empty, is a valid queue name: a batch passes the
// queue of the job before, so a run of jobs for one queue checks its name
// once.
func (c *Client) encodeResolved(args JobArgs, opts *EnqueueOpts, validQueue string) (*encodedJob, error) {
	var p EnqueueParams
	if err := c.newInsertParams(args, opts, &p); err != nil {
		return nil, err
	}
	return c.encodeParams(&p, validQueue)
}

// encodeParams validates a job, as every insert does once its middleware
// ran, and makes it ready to be written. See encodeResolved for
// validQueue.
func (c *Client) encodeParams(p *EnqueueParams, validQueue string) (*encodedJob, error) {
	kind := p.Kind
	if err := validateKind(kind); err != nil {
		return nil, err
	}
	queue := cmp.Or(p.Queue, DefaultQueue)
	if queue != validQueue {
		if err := validateQueue(queue); err != nil {
			return nil, fmt.Errorf("enqueue %s: %w", kind, err)
		}
	}
	if p.MaxAttempts < 0 || p.MaxAttempts > math.MaxInt32 {
		return nil, fmt.Errorf("%w option: enqueue %s: MaxAttempts %d out of range", ErrInvalid, kind, p.MaxAttempts)
	}
	if len(p.EncodedArgs) > c.config.MaxArgsSize {
		return nil, fmt.Errorf("%w: job args: enqueue %s: %d bytes, limit %d", ErrTooLarge, kind, len(p.EncodedArgs), c.config.MaxArgsSize)
	}
	meta := []byte("{}")
	if p.Meta != nil {
		var err error
		if meta, err = json.Marshal(p.Meta); err != nil {
			return nil, fmt.Errorf("%w job args: enqueue %s: meta: %w", ErrInvalid, kind, err)
		}
	}
	if err := validateInsert(p, meta); err != nil {
		return nil, err
	}
	job := &encodedJob{
		queue:       queue,
		kind:        kind,
		args:        p.EncodedArgs,
		priority:    p.Priority,
		maxAttempts: cmp.Or(p.MaxAttempts, defaultMaxAttempts),
		tags:        p.Tags,
		meta:        meta,
	}
	if job.tags == nil {
		job.tags = []string{}
	}
	if p.SingletonKey != "" {
		key := p.SingletonKey
		job.singleton = &key
	}
	if !p.RunAt.IsZero() {
		runAt := p.RunAt
		job.runAt = &runAt
	}
	if p.Unique != nil {
		var err error
		if job.unique, err = newUniqueKey(p.Unique, kind, queue, p.EncodedArgs); err != nil {
			return nil, err
		}
	}
	return job, nil
}

// Enqueue inserts one job and returns its row. The job is committed when
// Enqueue returns; use EnqueueTx to make it part of your own transaction.
// A unique job (InsertOpts.Unique) that has an equal job already is not
// inserted: the result is the existing job, with Duplicate set.
func (c *Client) Enqueue(ctx context.Context, args JobArgs, opts *EnqueueOpts) (*EnqueueResult, error) {
	res, err := c.insert(ctx, c.pool, args, opts)
	if err == nil && !res.Duplicate {
		c.wake(res.Queue)
	}
	return res, err
}

// EnqueueTx inserts one job inside tx: the job exists only if tx commits.
// See Enqueue for unique jobs.
func (c *Client) EnqueueTx(ctx context.Context, tx pgx.Tx, args JobArgs, opts *EnqueueOpts) (*EnqueueResult, error) {
	return c.insert(ctx, tx, args, opts)
}

type queryer interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

func (c *Client) insert(ctx context.Context, db queryer, args JobArgs, opts *EnqueueOpts) (*EnqueueResult, error) {
	if err := ctxError(ctx, "enqueue"); err != nil {
		return nil, err
	}
	if len(c.config.EnqueueMiddleware) == 0 {
		job, err := c.encode(args, opts)
		if err != nil {
			return nil, err
		}
		return c.insertJob(ctx, db, job)
	}
	var p EnqueueParams
	if err := c.newInsertParams(args, resolveOpts(args, opts), &p); err != nil {
		return nil, err
	}
	paramsForMiddleware(&p)
	res, err := c.runInsertMiddleware(ctx, []*EnqueueParams{&p}, func(ctx context.Context) (*EnqueuedJobs, error) {
		job, err := c.encodeParams(&p, "")
		if err != nil {
			return nil, err
		}
		r, err := c.insertJob(ctx, db, job)
		if err != nil {
			return nil, err
		}
		out := &EnqueuedJobs{Rows: []*JobRow{r.JobRow}}
		if r.Duplicate {
			out.Duplicates = []int{0}
		} else {
			out.Enqueued = 1
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	return &EnqueueResult{JobRow: res.Rows[0], Duplicate: len(res.Duplicates) > 0}, nil
}

// insertJob writes one validated job.
func (c *Client) insertJob(ctx context.Context, db queryer, job *encodedJob) (*EnqueueResult, error) {
	if job.unique != nil {
		return c.insertUnique(ctx, db, job)
	}
	// One round trip; the statements share the implicit transaction of the
	// batch (or the caller's), so the notification goes out at commit.
	batch := &pgx.Batch{}
	// JSON goes as text: in exec and simple_protocol mode pgx sends []byte
	// as bytea, which a jsonb parameter refuses.
	batch.Queue(c.q.Insert, job.queue, job.kind, string(job.args), job.priority, job.maxAttempts, job.runAt, job.tags, string(job.meta), job.singleton)
	batch.Queue(c.q.Notify, c.channel, job.queue, job.runAt)
	results := db.SendBatch(ctx, batch)
	rows, err := results.Query()
	if err != nil {
		_ = results.Close()
		return nil, dbError("enqueue "+job.kind, err)
	}
	row, err := pgx.CollectExactlyOneRow(rows, jobsql.ScanJobRow)
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
func (c *Client) EnqueueMany(ctx context.Context, params []EnqueueManyParams) (*EnqueueManyResult, error) {
	if err := ctxError(ctx, "enqueue many"); err != nil {
		return nil, err
	}
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return nil, dbError("enqueue many: begin", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	res, queues, err := c.enqueueMany(ctx, tx, params)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, dbError("enqueue many: commit", err)
	}
	for queue := range queues {
		c.wake(queue)
	}
	return res, nil
}

// copyThreshold is the batch size from which EnqueueMany uses COPY;
// smaller batches are one INSERT statement, which costs fewer round trips.
const copyThreshold = 64

// EnqueueManyTx inserts jobs inside tx: they exist only if tx commits.
// See EnqueueMany.
func (c *Client) EnqueueManyTx(ctx context.Context, tx pgx.Tx, params []EnqueueManyParams) (*EnqueueManyResult, error) {
	res, _, err := c.enqueueMany(ctx, tx, params)
	return res, err
}

// enqueueMany is EnqueueManyTx; it also returns the queues it wrote jobs
// due now to, for EnqueueMany to wake once committed.
func (c *Client) enqueueMany(ctx context.Context, tx pgx.Tx, params []EnqueueManyParams) (*EnqueueManyResult, map[string]bool, error) {
	if err := ctxError(ctx, "enqueue many"); err != nil {
		return nil, nil, err
	}
	if len(params) == 0 {
		return &EnqueueManyResult{}, nil, nil
	}
	if len(c.config.EnqueueMiddleware) > 0 {
		return c.enqueueManyMiddleware(ctx, tx, params)
	}
	params = resolveAll(params)
	unique := slices.ContainsFunc(params, func(p EnqueueManyParams) bool { return p.Opts != nil && p.Opts.Unique != nil })
	if len(params) >= copyThreshold && !unique {
		n, due, err := c.copyMany(ctx, tx, copySource{
			n:     len(params),
			later: func(i int) bool { return params[i].Opts != nil && !params[i].Opts.RunAt.IsZero() },
			encode: func(i int, validQueue string) (*encodedJob, error) {
				return c.encodeResolved(params[i].Args, params[i].Opts, validQueue)
			},
		})
		if err != nil {
			return nil, nil, err
		}
		return &EnqueueManyResult{Enqueued: n}, due, nil
	}
	jobs := make([]*encodedJob, len(params))
	for i, p := range params {
		job, err := c.encodeResolved(p.Args, p.Opts, "")
		if err != nil {
			return nil, nil, fmt.Errorf("job %d: %w", i, err)
		}
		jobs[i] = job
	}
	return c.writeMany(ctx, tx, jobs)
}

// enqueueManyMiddleware is enqueueMany through the insert middleware: the
// jobs are encoded first, for the middleware to see, then written as
// enqueueMany would.
func (c *Client) enqueueManyMiddleware(ctx context.Context, tx pgx.Tx, params []EnqueueManyParams) (*EnqueueManyResult, map[string]bool, error) {
	store := make([]EnqueueParams, len(params))
	ps := make([]*EnqueueParams, len(params))
	for i, p := range params {
		if err := c.newInsertParams(p.Args, resolveOpts(p.Args, p.Opts), &store[i]); err != nil {
			return nil, nil, fmt.Errorf("job %d: %w", i, err)
		}
		paramsForMiddleware(&store[i])
		ps[i] = &store[i]
	}
	var queues map[string]bool
	res, err := c.runInsertMiddleware(ctx, ps, func(ctx context.Context) (*EnqueuedJobs, error) {
		var r *EnqueueManyResult
		var err error
		if len(ps) >= copyThreshold && !slices.ContainsFunc(ps, func(p *EnqueueParams) bool { return p.Unique != nil }) {
			var n int64
			n, queues, err = c.copyMany(ctx, tx, copySource{
				n:      len(ps),
				later:  func(i int) bool { return !ps[i].RunAt.IsZero() },
				encode: func(i int, validQueue string) (*encodedJob, error) { return c.encodeParams(ps[i], validQueue) },
			})
			r = &EnqueueManyResult{Enqueued: n}
		} else {
			jobs := make([]*encodedJob, len(ps))
			for i, p := range ps {
				if jobs[i], err = c.encodeParams(p, ""); err != nil {
					return nil, fmt.Errorf("job %d: %w", i, err)
				}
			}
			r, queues, err = c.writeMany(ctx, tx, jobs)
		}
		if err != nil {
			return nil, err
		}
		return &EnqueuedJobs{Enqueued: r.Enqueued, Duplicates: r.Duplicates}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return &EnqueueManyResult{Enqueued: res.Enqueued, Duplicates: res.Duplicates}, queues, nil
}

// writeMany writes a batch of validated jobs in statements (chunks when
// some are unique) and returns the queues of its jobs.
func (c *Client) writeMany(ctx context.Context, tx pgx.Tx, jobs []*encodedJob) (*EnqueueManyResult, map[string]bool, error) {
	queues := map[string]bool{}
	unique := false
	for _, j := range jobs {
		queues[j.queue] = true
		unique = unique || j.unique != nil
	}
	if unique {
		res, err := c.insertManyUnique(ctx, tx, jobs)
		return res, queues, err
	}
	n, err := c.insertMany(ctx, tx, jobs)
	if err != nil {
		return nil, nil, err
	}
	return &EnqueueManyResult{Enqueued: n}, queues, nil
}

// insertMany writes a small batch, and its notifications, in one round trip.
func (c *Client) insertMany(ctx context.Context, tx pgx.Tx, jobs []*encodedJob) (int64, error) {
	cols, err := newJobColumns(jobs)
	if err != nil {
		return 0, err
	}
	batch := &pgx.Batch{}
	batch.Queue(c.q.InsertMany, cols.args()...)
	batch.Queue(c.q.NotifyDue, c.channel, cols.queues, cols.runAts)
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
// cannot hold rows of different lengths). JSON columns are text: in exec
// and simple_protocol mode pgx sends [][]byte as bytea[].
type jobColumns struct {
	queues, kinds       []string
	singletons          []*string
	encArgs, tags, meta []string
	priorities          []int16
	maxAttempts         []int32
	runAts              []*time.Time
}

func newJobColumns(jobs []*encodedJob) (*jobColumns, error) {
	n := len(jobs)
	c := &jobColumns{
		queues: make([]string, n), kinds: make([]string, n), singletons: make([]*string, n),
		encArgs: make([]string, n), tags: make([]string, n), meta: make([]string, n),
		priorities: make([]int16, n), maxAttempts: make([]int32, n), runAts: make([]*time.Time, n),
	}
	for i, j := range jobs {
		t, err := json.Marshal(j.tags)
		if err != nil {
			return nil, fmt.Errorf("%w job args: tags: %w", ErrInvalid, err)
		}
		c.queues[i], c.kinds[i], c.singletons[i] = j.queue, j.kind, j.singleton
		c.encArgs[i], c.tags[i], c.meta[i] = string(j.args), string(t), string(j.meta)
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
	if _, err := tx.Exec(ctx, c.q.NotifyQueues, c.channel, queues); err != nil {
		return dbError("enqueue many: notify", err)
	}
	return nil
}
