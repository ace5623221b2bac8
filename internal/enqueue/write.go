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
}

// dbError wraps a database error with the operation, as the root's
// errors are.
func dbError(op string, err error) error { return dberr.Wrap("pgqueue", op, err) }

// One checks the job p describes and writes it with its notification, in
// one round trip; the statements share the implicit transaction of the
// batch (or db's), so the notification goes out at commit. A unique job
// that has an equal job already is not written: the row is that job, and
// duplicate is true.
func (w *Writer) One(ctx context.Context, db Batcher, p *Params) (row *pgqueuetype.JobRow, duplicate bool, err error) {
	job := new(Job) // its fields are the batch's arguments until it is sent
	if err := w.Encode(p, "", job); err != nil {
		return nil, false, err
	}
	if job.unique != nil {
		return w.insertUnique(ctx, db, job)
	}
	batch := &pgx.Batch{}
	// JSON goes as text: in exec and simple_protocol mode pgx sends []byte
	// as bytea, which a jsonb parameter refuses.
	batch.Queue(w.Q.Insert, job.Queue, job.Kind, string(job.Args), job.Priority, job.MaxAttempts, job.runAtArg(), job.Tags, string(job.Meta), job.singletonArg())
	batch.Queue(w.Q.Notify, w.Channel, job.Queue, job.runAtArg())
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
// job fails the batch with its error, prefixed with its position.
func (w *Writer) Many(ctx context.Context, tx pgx.Tx, src Source) (Result, error) {
	if src.N >= CopyThreshold && !src.Unique {
		return w.Copy(ctx, tx, src, nil)
	}
	jobs := make([]Job, src.N)
	var p Params
	for i := range jobs {
		if err := src.Params(i, &p); err != nil {
			return Result{}, fmt.Errorf("job %d: %w", i, err)
		}
		if err := w.Encode(&p, "", &jobs[i]); err != nil {
			return Result{}, fmt.Errorf("job %d: %w", i, err)
		}
	}
	return w.writeMany(ctx, tx, jobs)
}

// writeMany writes a batch of checked jobs in statements (chunks when
// some are unique); the result's Queues are those of all its jobs.
func (w *Writer) writeMany(ctx context.Context, tx pgx.Tx, jobs []Job) (Result, error) {
	queues := map[string]bool{}
	unique := false
	for i := range jobs {
		queues[jobs[i].Queue] = true
		unique = unique || jobs[i].unique != nil
	}
	if unique {
		res, err := w.insertManyUnique(ctx, tx, jobs)
		res.Queues = queues
		return res, err
	}
	n, err := w.insertMany(ctx, tx, jobs)
	if err != nil {
		return Result{}, err
	}
	return Result{Enqueued: n, Queues: queues}, nil
}

// insertMany writes a small batch, and its notifications, in one round trip.
func (w *Writer) insertMany(ctx context.Context, tx pgx.Tx, jobs []Job) (int64, error) {
	cols, err := newJobColumns(jobs)
	if err != nil {
		return 0, err
	}
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

// newJobColumns lays jobs out as columns; the pointers point into jobs.
func newJobColumns(jobs []Job) (*jobColumns, error) {
	n := len(jobs)
	c := &jobColumns{
		queues: make([]string, n), kinds: make([]string, n), singletons: make([]*string, n),
		encArgs: make([]string, n), tags: make([]string, n), meta: make([]string, n),
		priorities: make([]int16, n), maxAttempts: make([]int32, n), runAts: make([]*time.Time, n),
	}
	for i := range jobs {
		j := &jobs[i]
		t, err := json.Marshal(j.Tags)
		if err != nil {
			return nil, fmt.Errorf("%w job args: tags: %w", pgqueuetype.ErrInvalid, err)
		}
		c.queues[i], c.kinds[i], c.singletons[i] = j.Queue, j.Kind, j.singletonArg()
		c.encArgs[i], c.tags[i], c.meta[i] = string(j.Args), string(t), string(j.Meta)
		c.priorities[i], c.maxAttempts[i], c.runAts[i] = j.Priority, int32(j.MaxAttempts), j.runAtArg()
	}
	return c, nil
}

// args are the statement's first nine arguments, in its order.
func (c *jobColumns) args() []any {
	return []any{c.queues, c.kinds, c.encArgs, c.priorities, c.maxAttempts, c.tags, c.meta, c.singletons, c.runAts}
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
