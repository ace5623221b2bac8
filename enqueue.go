package pgqueue

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/enqueue"
)

// EnqueueOpts are the options of one job. The zero value is a job on
// QueueDefault, priority 0, due now, with 25 attempts.
type EnqueueOpts struct {
	// Queue is the queue to insert into. Default QueueDefault. A queue name
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
	// PartitionKey groups the job with the other jobs of its queue that
	// have the same key, for the queue's per-key flow limits: at most so
	// many of them running, or starting per period, across all clients
	// (see docs/concepts/flow-control.md). Empty means none: a queue set
	// to partition by kind or args fields derives the key from those. A
	// key is 1 to 255 bytes of valid UTF-8 without NUL bytes.
	PartitionKey string
	// SequenceKey makes the job part of a sequence: the jobs of its queue
	// with the same key run one at a time, in the order they were
	// inserted, and a failing job holds the jobs after it while it retries
	// (see docs/concepts/flow-control.md). Empty means none. A key is 1 to
	// 255 bytes of valid UTF-8 without NUL bytes.
	SequenceKey string
	// Unique, when set, makes the job unique: it is not inserted while an
	// equal job exists (see UniqueOpts). A unique job cannot take part in
	// a workflow.
	Unique *UniqueOpts
	// DependsOn are the jobs this job waits for: it is inserted blocked,
	// invisible to claims, and becomes available (or scheduled, if RunAt
	// is ahead) in the transaction that completes the last of them. See
	// docs/concepts/workflows.md. At most MaxJobDependencies; a cycle is
	// ErrDependencyCycle, a job that does not exist ErrDependencyNotFound,
	// and nothing is written.
	DependsOn []Dependency
	// OnParentFailure is the policy of the job's dependencies that set
	// none (Dependency.OnFailure): what the job does when a job it depends
	// on is discarded or cancelled. Default ParentFailureCancel.
	OnParentFailure ParentFailurePolicy
	// Name names the job within its EnqueueMany batch, for the other jobs
	// of the batch to depend on (DependsOnName). Empty for none. Names are
	// not stored.
	Name string
	// Workflow adds the job to an existing workflow (an
	// EnqueueManyResult.Workflow). Zero: a job that depends on jobs joins
	// their workflow, or its batch makes a new one.
	Workflow int64
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
	// IDs are the jobs' ids, in params' order, and Workflow the workflow
	// they belong to (see WorkflowGet): set only for a batch in which some
	// job has DependsOn, a Name or a Workflow. Other batches do not read
	// their ids back.
	IDs      []int64
	Workflow int64
}

// EnqueueManyParams is one job of EnqueueMany.
type EnqueueManyParams struct {
	// Args are the job's args.
	Args JobArgs
	// Opts are its options; nil means defaults.
	Opts *EnqueueOpts
}

// JobArgsWithEnqueueOpts is implemented by args types that declare the
// default enqueue options of their kind. Every insert of such args (Enqueue,
// EnqueueMany and their Tx twins, periodic runs) starts from these
// defaults, and the caller's InsertOpts override them field by field:
// each non-zero field of the caller's (a non-empty Queue, SingletonKey,
// PartitionKey or SequenceKey, a non-zero Priority, RunAt or MaxAttempts,
// non-nil Tags or Unique) wins. Meta is merged key by key, the caller's keys winning. So a
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
	o.PartitionKey = cmp.Or(opts.PartitionKey, o.PartitionKey)
	o.SequenceKey = cmp.Or(opts.SequenceKey, o.SequenceKey)
	if opts.Unique != nil {
		o.Unique = opts.Unique
	}
	if opts.DependsOn != nil {
		o.DependsOn = opts.DependsOn
	}
	o.OnParentFailure = cmp.Or(opts.OnParentFailure, o.OnParentFailure)
	o.Name = cmp.Or(opts.Name, o.Name)
	o.Workflow = cmp.Or(opts.Workflow, o.Workflow)
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
func newInsertParams(args JobArgs, opts *EnqueueOpts, p *EnqueueParams) error {
	kind, encoded, err := enqueue.EncodeArgs(args)
	if err != nil {
		return err
	}
	if opts == nil {
		opts = &EnqueueOpts{}
	}
	*p = EnqueueParams{
		Args: args, Kind: kind, EncodedArgs: encoded,
		Queue: cmp.Or(opts.Queue, QueueDefault), Priority: opts.Priority, RunAt: opts.RunAt, MaxAttempts: opts.MaxAttempts,
		Tags: opts.Tags, Meta: opts.Meta, SingletonKey: opts.SingletonKey,
		PartitionKey: opts.PartitionKey, SequenceKey: opts.SequenceKey, Unique: opts.Unique,
		DependsOn: opts.DependsOn, OnParentFailure: opts.OnParentFailure, Name: opts.Name, Workflow: opts.Workflow,
	}
	return nil
}

// params fills out with p, as the writer takes a job: the writer checks
// it, as every insert checks its jobs once the middleware ran.
func (p *EnqueueParams) params(out *enqueue.Params) {
	*out = enqueue.Params{
		Kind: p.Kind, Args: p.EncodedArgs,
		Queue: p.Queue, Priority: p.Priority, RunAt: p.RunAt, MaxAttempts: p.MaxAttempts,
		Tags: p.Tags, Meta: p.Meta, SingletonKey: p.SingletonKey,
		PartitionKey: p.PartitionKey, SequenceKey: p.SequenceKey, Unique: (*enqueue.Unique)(p.Unique),
		DependsOn: deps(p.DependsOn), OnParentFailure: string(p.OnParentFailure), Name: p.Name, Workflow: p.Workflow,
	}
}

// jobParams is newInsertParams and params in one, for an insert without
// middleware: p is filled straight from args and opts (resolved already).
func jobParams(args JobArgs, opts *EnqueueOpts, p *enqueue.Params) error {
	kind, encoded, err := enqueue.EncodeArgs(args)
	if err != nil {
		return err
	}
	if opts == nil {
		opts = &EnqueueOpts{}
	}
	*p = enqueue.Params{
		Kind: kind, Args: encoded,
		Queue: opts.Queue, Priority: opts.Priority, RunAt: opts.RunAt, MaxAttempts: opts.MaxAttempts,
		Tags: opts.Tags, Meta: opts.Meta, SingletonKey: opts.SingletonKey,
		PartitionKey: opts.PartitionKey, SequenceKey: opts.SequenceKey, Unique: (*enqueue.Unique)(opts.Unique),
		DependsOn: deps(opts.DependsOn), OnParentFailure: string(opts.OnParentFailure), Name: opts.Name, Workflow: opts.Workflow,
	}
	return nil
}

// Enqueue inserts one job and returns its row. The job is committed when
// Enqueue returns; use EnqueueTx to make it part of your own transaction.
// A unique job (EnqueueOpts.Unique) that has an equal job already is not
// inserted: the result is the existing job, with Duplicate set. That is
// always the answer for a duplicate, never an error, however many inserts
// of the key race with workers completing its jobs.
func (c *Client) Enqueue(ctx context.Context, args JobArgs, opts *EnqueueOpts) (*EnqueueResult, error) {
	res, err := c.insert(ctx, c.pool, args, opts)
	if err == nil && !res.Duplicate {
		c.wake(res.Queue)
	}
	return res, err
}

// EnqueueTx inserts one job inside tx: the job exists only if tx commits.
// See Enqueue for unique jobs. A unique insert that races another may run
// a second statement in a savepoint of tx (tx.Begin), ended before
// EnqueueTx returns: it leaves no lock behind, and tx usable after an
// error of that statement.
func (c *Client) EnqueueTx(ctx context.Context, tx pgx.Tx, args JobArgs, opts *EnqueueOpts) (*EnqueueResult, error) {
	return c.insert(ctx, tx, args, opts)
}

func (c *Client) insert(ctx context.Context, db enqueue.DB, args JobArgs, opts *EnqueueOpts) (*EnqueueResult, error) {
	if err := ctxError(ctx, "enqueue"); err != nil {
		return nil, err
	}
	if len(c.config.EnqueueMiddleware) == 0 {
		var p enqueue.Params
		if err := jobParams(args, resolveOpts(args, opts), &p); err != nil {
			return nil, err
		}
		return c.insertJob(ctx, db, &p)
	}
	var p EnqueueParams
	if err := newInsertParams(args, resolveOpts(args, opts), &p); err != nil {
		return nil, err
	}
	paramsForMiddleware(&p)
	res, err := c.runEnqueueMiddleware(ctx, []*EnqueueParams{&p}, func(ctx context.Context) (*EnqueuedJobs, error) {
		var ep enqueue.Params
		p.params(&ep)
		r, err := c.insertJob(ctx, db, &ep)
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

// insertJob checks and writes one job, with its notification.
func (c *Client) insertJob(ctx context.Context, db enqueue.DB, p *enqueue.Params) (*EnqueueResult, error) {
	row, dup, err := c.enq.One(ctx, db, p)
	if err != nil {
		return nil, err
	}
	return &EnqueueResult{JobRow: row, Duplicate: dup}, nil
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

// EnqueueManyTx inserts jobs inside tx: they exist only if tx commits.
// See EnqueueMany.
func (c *Client) EnqueueManyTx(ctx context.Context, tx pgx.Tx, params []EnqueueManyParams) (*EnqueueManyResult, error) {
	res, _, err := c.enqueueMany(ctx, tx, params)
	return res, err
}

// enqueueMany is EnqueueManyTx; it also returns the queues to wake once
// committed (of the jobs due now, for COPY).
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
	res, err := c.enq.Many(ctx, tx, manySource(resolveAll(params)))
	if err != nil {
		return nil, nil, err
	}
	return &EnqueueManyResult{Enqueued: res.Enqueued, Duplicates: res.Duplicates, IDs: res.IDs, Workflow: res.Workflow}, res.Queues, nil
}

// manySource is params, resolved already, as the writer reads a batch:
// each job encoded when the write reaches it.
func manySource(params []EnqueueManyParams) enqueue.Source {
	return enqueue.Source{
		N:      len(params),
		Unique: slices.ContainsFunc(params, func(p EnqueueManyParams) bool { return p.Opts != nil && p.Opts.Unique != nil }),
		Workflow: slices.ContainsFunc(params, func(p EnqueueManyParams) bool {
			return p.Opts != nil && (len(p.Opts.DependsOn) > 0 || p.Opts.Name != "" || p.Opts.Workflow != 0)
		}),
		Later:  func(i int) bool { return params[i].Opts != nil && !params[i].Opts.RunAt.IsZero() },
		Params: func(i int, p *enqueue.Params) error { return jobParams(params[i].Args, params[i].Opts, p) },
	}
}

// enqueueManyMiddleware is enqueueMany through the enqueue middleware: the
// jobs are encoded first, for the middleware to see, then written as
// enqueueMany would.
func (c *Client) enqueueManyMiddleware(ctx context.Context, tx pgx.Tx, params []EnqueueManyParams) (*EnqueueManyResult, map[string]bool, error) {
	store := make([]EnqueueParams, len(params))
	ps := make([]*EnqueueParams, len(params))
	for i, p := range params {
		if err := newInsertParams(p.Args, resolveOpts(p.Args, p.Opts), &store[i]); err != nil {
			return nil, nil, fmt.Errorf("job %d: %w", i, err)
		}
		paramsForMiddleware(&store[i])
		ps[i] = &store[i]
	}
	var queues map[string]bool
	var ids []int64
	var workflow int64
	res, err := c.runEnqueueMiddleware(ctx, ps, func(ctx context.Context) (*EnqueuedJobs, error) {
		r, err := c.enq.Many(ctx, tx, enqueue.Source{
			N:      len(ps),
			Unique: slices.ContainsFunc(ps, func(p *EnqueueParams) bool { return p.Unique != nil }),
			Workflow: slices.ContainsFunc(ps, func(p *EnqueueParams) bool {
				return len(p.DependsOn) > 0 || p.Name != "" || p.Workflow != 0
			}),
			Later:  func(i int) bool { return !ps[i].RunAt.IsZero() },
			Params: func(i int, p *enqueue.Params) error { ps[i].params(p); return nil },
		})
		if err != nil {
			return nil, err
		}
		queues, ids, workflow = r.Queues, r.IDs, r.Workflow
		return &EnqueuedJobs{Enqueued: r.Enqueued, Duplicates: r.Duplicates}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return &EnqueueManyResult{Enqueued: res.Enqueued, Duplicates: res.Duplicates, IDs: ids, Workflow: workflow}, queues, nil
}
