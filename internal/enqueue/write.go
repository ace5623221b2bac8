package enqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/dberr"
	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// Writer checks and writes jobs for one client: its statements, NOTIFY
// channel and limits. Its methods are safe for concurrent use.
type Writer struct {
	// Q are the statements of the client's schema.
	Q *jobsql.Queries
	// Schema is the client's schema, for what a tracer is told of a COPY.
	Schema string
	// Channel is the NOTIFY channel of the schema's inserts.
	Channel string
	// MaxArgsSize is the most bytes a job's encoded args may hold.
	MaxArgsSize int
	// DefaultQueue is the queue of a job that names none.
	DefaultQueue string
	// DefaultMaxAttempts is the attempts of a job that sets none.
	DefaultMaxAttempts int
}

// Batcher sends a batch of statements: a pool, a connection or a
// transaction.
type Batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// DB is where One writes: a pool or a transaction (whose Begin makes a
// savepoint). A unique insert that races needs a transaction of its own,
// or a savepoint (see upsertUnique).
type DB interface {
	Batcher
	Begin(ctx context.Context) (pgx.Tx, error)
}

// CopyThreshold is the batch size from which Many writes with COPY;
// smaller batches are one INSERT statement, which costs fewer round trips.
const CopyThreshold = 64

// Source is the jobs of a batch, each filled in when the write reaches
// it, so that a COPY encodes jobs while the server reads the ones before.
type Source struct {
	// N is how many jobs there are.
	N int
	// Unique says whether some job is unique: those cannot go through
	// COPY.
	Unique bool
	// Workflow says whether some job depends on others, is named for
	// others to depend on, or joins a workflow: the batch is then written
	// by Workflow.
	Workflow bool
	// Later says whether job i has a RunAt, before it is filled in.
	Later func(i int) bool
	// Params fills p with job i. p is reused from job to job: Params
	// must set every field.
	Params func(i int, p *Params) error
}

// Result is what a batch wrote.
type Result struct {
	// Enqueued is how many jobs were inserted.
	Enqueued int64
	// Duplicates are the positions, ascending, of the unique jobs not
	// inserted because an equal job existed.
	Duplicates []int
	// Queues are the queues to wake once the batch is committed.
	Queues map[string]bool
	// IDs are the jobs' ids in the batch's order, and Workflow their
	// workflow: for a batch with dependencies only (Source.Workflow).
	IDs      []int64
	Workflow int64
}

// dbError wraps a database error with the operation, as the root's
// errors are.
func dbError(op string, err error) error { return dberr.Wrap("pgqueue", op, err) }

// One checks the job p describes and writes it with its notification, in
// one round trip; the statements share the implicit transaction of the
// batch (or db's), so the notification goes out at commit. A unique job
// that has an equal job already is not written: the row is that job, and
// duplicate is true.
func (w *Writer) One(ctx context.Context, db DB, p *Params) (row *pgqueuetype.JobRow, duplicate bool, err error) {
	var job Job
	if err := w.Encode(p, "", &job); err != nil {
		return nil, false, err
	}
	if p.IsWorkflow() {
		row, err := w.WorkflowOne(ctx, db, p)
		return row, false, err
	}
	if job.unique != nil {
		return w.insertUnique(ctx, db, &job)
	}
	n := job.nullArgs()
	batch := &pgx.Batch{}
	batch.Queue(w.Q.Insert, n.insertArgs(&job)...)
	batch.Queue(w.Q.Notify, w.Channel, job.Queue, n.runAt)
	results := db.SendBatch(ctx, batch)
	rows, err := results.Query()
	if err != nil {
		_ = results.Close()
		return nil, false, dbError("enqueue "+job.Kind, err)
	}
	row, err = pgx.CollectExactlyOneRow(rows, jobsql.ScanJobRow)
	if err != nil {
		_ = results.Close()
		return nil, false, dbError("enqueue "+job.Kind, err)
	}
	if err := results.Close(); err != nil {
		return nil, false, dbError("enqueue "+job.Kind, err)
	}
	return row, false, nil
}

// Many checks and writes the jobs of src, inside tx, all or none.
// Batches of CopyThreshold jobs or more without unique jobs go through
// COPY (see Copy); smaller ones are one statement, and batches with
// unique jobs are written in chunks that skip the duplicates. An invalid
// job fails the batch with its error, prefixed with its position. The
// result's Queues are those of all the jobs (of the jobs due now, for
// COPY).
func (w *Writer) Many(ctx context.Context, tx pgx.Tx, src Source) (Result, error) {
	if src.Workflow {
		return w.Workflow(ctx, tx, src)
	}
	if src.N >= CopyThreshold && !src.Unique {
		return w.Copy(ctx, tx, src, nil)
	}
	cols := newJobColumns(src.N)
	queues := map[string]bool{}
	var p Params
	var job Job
	for i := range src.N {
		err := src.Params(i, &p)
		if err == nil {
			err = w.Encode(&p, "", &job)
		}
		if err == nil {
			err = cols.set(i, &job)
		}
		if err != nil {
			return Result{}, fmt.Errorf("job %d: %w", i, err)
		}
		queues[job.Queue] = true
	}
	if cols.bases != nil {
		res, err := w.insertManyUnique(ctx, tx, cols)
		res.Queues = queues
		return res, err
	}
	n, err := w.insertMany(ctx, tx, cols)
	if err != nil {
		return Result{}, err
	}
	return Result{Enqueued: n, Queues: queues}, nil
}

// insertMany writes a small batch, and its notifications, in one round trip.
func (w *Writer) insertMany(ctx context.Context, tx pgx.Tx, cols *jobColumns) (int64, error) {
	batch := &pgx.Batch{}
	batch.Queue(w.Q.InsertMany, cols.args()...)
	batch.Queue(w.Q.NotifyDue, w.Channel, cols.queues, cols.runAts)
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
// sql/insert_many.sql (and sql/insert_many_unique.sql): one array per
// column, tags as JSON (a SQL array cannot hold rows of different
// lengths). JSON columns are text: in exec and simple_protocol mode pgx
// sends [][]byte as bytea[]. Filled job by job as the jobs are checked,
// so a batch keeps no Job of its own.
type jobColumns struct {
	queues, kinds                     []string
	singletons, partitions, sequences nullTextColumn
	encArgs, tags, meta               []string
	priorities                        []int16
	maxAttempts                       []int32
	runAts                            []*time.Time
	// runAtVals holds what runAts point to, made when a first job needs
	// them.
	runAtVals []time.Time
	// The unique keys, made when a first unique job comes; a job that is
	// not unique has a nil base.
	bases   [][]byte
	periods []int64
	states  []*string
}

// nullTextColumn is a nullable text column of a batch: an empty value is
// NULL.
type nullTextColumn struct {
	// ptrs is the statement's array, nil for NULL.
	ptrs []*string
	// vals holds what ptrs point to, made when a first job needs them.
	vals []string
}

func newNullTextColumn(n int) nullTextColumn { return nullTextColumn{ptrs: make([]*string, n)} }

// set fills row i with s, which stays NULL when empty.
func (c *nullTextColumn) set(i int, s string) {
	if s == "" {
		return
	}
	if c.vals == nil {
		c.vals = make([]string, len(c.ptrs))
	}
	c.vals[i] = s
	c.ptrs[i] = &c.vals[i]
}

// slice is rows [from, to) of c, sharing its array.
func (c *nullTextColumn) slice(from, to int) nullTextColumn {
	return nullTextColumn{ptrs: c.ptrs[from:to]}
}

// newJobColumns makes the columns of n jobs.
func newJobColumns(n int) *jobColumns {
	return &jobColumns{
		queues: make([]string, n), kinds: make([]string, n),
		singletons: newNullTextColumn(n), partitions: newNullTextColumn(n), sequences: newNullTextColumn(n),
		encArgs: make([]string, n), tags: make([]string, n), meta: make([]string, n),
		priorities: make([]int16, n), maxAttempts: make([]int32, n), runAts: make([]*time.Time, n),
	}
}

// set fills row i with job.
func (c *jobColumns) set(i int, job *Job) error {
	t, err := json.Marshal(job.Tags)
	if err != nil {
		return fmt.Errorf("%w job args: tags: %w", pgqueuetype.ErrInvalid, err)
	}
	n := len(c.queues)
	c.queues[i], c.kinds[i] = job.Queue, job.Kind
	c.encArgs[i], c.tags[i], c.meta[i] = string(job.Args), string(t), string(job.Meta)
	c.priorities[i], c.maxAttempts[i] = job.Priority, int32(job.MaxAttempts)
	c.singletons.set(i, job.SingletonKey)
	c.partitions.set(i, job.PartitionKey)
	c.sequences.set(i, job.SequenceKey)
	if !job.RunAt.IsZero() {
		if c.runAtVals == nil {
			c.runAtVals = make([]time.Time, n)
		}
		c.runAtVals[i] = job.RunAt
		c.runAts[i] = &c.runAtVals[i]
	}
	if u := job.unique; u != nil {
		if c.bases == nil {
			c.bases, c.periods, c.states = make([][]byte, n), make([]int64, n), make([]*string, n)
		}
		// states are jsonb, so text; bases are bytea.
		b, err := json.Marshal(u.states)
		if err != nil {
			return err
		}
		s := string(b)
		c.bases[i], c.periods[i], c.states[i] = u.base, u.periodUS, &s
	}
	return nil
}

// slice is rows [from, to) of c, sharing its arrays.
func (c *jobColumns) slice(from, to int) *jobColumns {
	out := &jobColumns{
		queues: c.queues[from:to], kinds: c.kinds[from:to],
		singletons: c.singletons.slice(from, to), partitions: c.partitions.slice(from, to), sequences: c.sequences.slice(from, to),
		encArgs: c.encArgs[from:to], tags: c.tags[from:to], meta: c.meta[from:to],
		priorities: c.priorities[from:to], maxAttempts: c.maxAttempts[from:to], runAts: c.runAts[from:to],
	}
	if c.bases != nil {
		out.bases, out.periods, out.states = c.bases[from:to], c.periods[from:to], c.states[from:to]
	}
	return out
}

// args are the statement's first eleven arguments, in its order.
func (c *jobColumns) args() []any {
	return []any{c.queues, c.kinds, c.encArgs, c.priorities, c.maxAttempts, c.tags, c.meta,
		c.singletons.ptrs, c.partitions.ptrs, c.sequences.ptrs, c.runAts}
}

// notifyQueues sends one notification per queue in due, however many
// jobs each got: delivered at commit.
func (w *Writer) notifyQueues(ctx context.Context, tx pgx.Tx, due map[string]bool) error {
	if len(due) == 0 {
		return nil
	}
	queues := make([]string, 0, len(due))
	for q := range due {
		queues = append(queues, q)
	}
	if _, err := tx.Exec(ctx, w.Q.NotifyQueues, w.Channel, queues); err != nil {
		return dbError("enqueue many: notify", err)
	}
	return nil
}
