package enqueue

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// insertUnique writes one unique job, or finds the equal job that blocks
// it, with its notification. Nearly always that is one round trip
// (insert_unique.sql). That statement reads the job holding the key by its
// snapshot, so it comes back empty when that job was committed after the
// snapshot was taken (a concurrent insert, maybe after a worker completed
// the one before); then upsertUnique settles it, in one try.
func (w *Writer) insertUnique(ctx context.Context, db DB, job *Job) (*pgqueuetype.JobRow, bool, error) {
	u := job.unique
	n := job.nullArgs()
	batch := &pgx.Batch{}
	batch.Queue(w.Q.InsertUnique, append(n.insertArgs(job), u.base, u.periodUS, u.states)...)
	batch.Queue(w.Q.Notify, w.Channel, job.Queue, n.runAt)
	row, dup, err := readUnique(db.SendBatch(ctx, batch))
	if err != nil || row != nil {
		return row, dup, wrapUnique(job, err)
	}
	return w.upsertUnique(ctx, db, job)
}

// readUnique reads the flagged job row of the first statement in results
// (insert_unique or insert_unique_upsert), nil when there is none, and
// closes results.
func readUnique(results pgx.BatchResults) (*pgqueuetype.JobRow, bool, error) {
	rows, err := results.Query()
	if err != nil {
		_ = results.Close()
		return nil, false, err
	}
	var (
		found *pgqueuetype.JobRow
		dup   bool
		s     jobsql.Scanner
	)
	for rows.Next() {
		d, row, err := s.ScanFlagged(rows)
		if err != nil {
			rows.Close()
			_ = results.Close()
			return nil, false, err
		}
		found, dup = row, d
	}
	if err := rows.Err(); err != nil {
		_ = results.Close()
		return nil, false, err
	}
	return found, dup, results.Close()
}

// wrapUnique adds the job's kind to a database error.
func wrapUnique(job *Job, err error) error {
	if err == nil {
		return nil
	}
	return dbError("enqueue "+job.Kind, err)
}

// upsertUnique writes one unique job or returns the job holding its key,
// with insert_unique_upsert.sql, which cannot end with neither. Its update
// of a duplicate only locks it, and must not keep that lock, so it runs
// under db.Begin: a savepoint in the caller's transaction (pgx), a
// transaction of its own on a pool. A duplicate or an error rolls it
// back, which also leaves the caller's transaction usable.
func (w *Writer) upsertUnique(ctx context.Context, db DB, job *Job) (*pgqueuetype.JobRow, bool, error) {
	sub, err := db.Begin(ctx)
	if err != nil {
		return nil, false, wrapUnique(job, err)
	}
	// After Commit this does nothing.
	defer func() { _ = sub.Rollback(context.WithoutCancel(ctx)) }()
	u := job.unique
	n := job.nullArgs()
	batch := &pgx.Batch{}
	batch.Queue(w.Q.InsertUniqueUpsert, append(n.insertArgs(job), u.base, u.periodUS, u.states)...)
	batch.Queue(w.Q.Notify, w.Channel, job.Queue, n.runAt)
	row, dup, err := readUnique(sub.SendBatch(ctx, batch))
	if err == nil && row == nil {
		err = errors.New("upsert returned no row") // PostgreSQL guarantees one
	}
	if err == nil && !dup {
		err = sub.Commit(ctx)
	}
	return row, dup, wrapUnique(job, err)
}

// uniqueChunk is the most jobs insertManyUnique writes in one statement.
const uniqueChunk = 1000

// insertManyUnique writes a batch that holds unique jobs, in statements of
// uniqueChunk jobs, with its notifications. A later chunk's job that
// equals an earlier chunk's conflicts with it in the table, so duplicates
// across chunks are found too.
func (w *Writer) insertManyUnique(ctx context.Context, tx pgx.Tx, cols *jobColumns) (Result, error) {
	var res Result
	for start := 0; start < len(cols.queues); start += uniqueChunk {
		chunk := cols.slice(start, min(start+uniqueChunk, len(cols.queues)))
		inserted, err := w.insertUniqueChunk(ctx, tx, chunk)
		if err != nil {
			return Result{}, err
		}
		for i, base := range chunk.bases {
			if base == nil || inserted[i] {
				res.Enqueued++
			} else {
				res.Duplicates = append(res.Duplicates, start+i)
			}
		}
	}
	return res, nil
}

// insertUniqueChunk writes one statement's worth of jobs and returns which
// unique ones it inserted, by position in chunk.
func (w *Writer) insertUniqueChunk(ctx context.Context, tx pgx.Tx, chunk *jobColumns) (map[int]bool, error) {
	batch := &pgx.Batch{}
	batch.Queue(w.Q.InsertManyUnique, append(chunk.args(), chunk.bases, chunk.periods, chunk.states)...)
	batch.Queue(w.Q.NotifyDue, w.Channel, chunk.queues, chunk.runAts)
	br := tx.SendBatch(ctx, batch)
	inserted := map[int]bool{}
	rows, err := br.Query()
	if err == nil {
		var ord int64
		_, err = pgx.ForEachRow(rows, []any{&ord}, func() error {
			inserted[int(ord)-1] = true
			return nil
		})
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, dbError("enqueue many", err)
	}
	return inserted, nil
}
