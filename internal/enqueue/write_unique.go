package enqueue

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// uniqueAttempts bounds insertUnique's tries. A try comes back empty only
// when the conflicting job was committed after the statement's snapshot,
// or left its states since; the next try sees it, so two tries nearly
// always do.
const uniqueAttempts = 5

// insertUnique writes one unique job, or finds the equal job that blocks
// it, with its notification, one round trip a try.
func (w *Writer) insertUnique(ctx context.Context, db Batcher, job *Job) (*pgqueuetype.JobRow, bool, error) {
	u := job.unique
	runAt, singleton := job.nullArgs()
	for range uniqueAttempts {
		batch := &pgx.Batch{}
		// JSON as text, as in One.
		batch.Queue(w.Q.InsertUnique, job.Queue, job.Kind, string(job.Args), job.Priority, job.MaxAttempts, runAt, job.Tags, string(job.Meta), singleton,
			u.base, u.periodUS, u.states)
		batch.Queue(w.Q.Notify, w.Channel, job.Queue, runAt)
		results := db.SendBatch(ctx, batch)
		rows, err := results.Query()
		if err != nil {
			_ = results.Close()
			return nil, false, dbError("enqueue "+job.Kind, err)
		}
		var (
			found    *pgqueuetype.JobRow
			foundDup bool
			s        jobsql.Scanner
		)
		for rows.Next() {
			dup, row, err := s.ScanFlagged(rows)
			if err != nil {
				rows.Close()
				_ = results.Close()
				return nil, false, dbError("enqueue "+job.Kind, err)
			}
			found, foundDup = row, dup
		}
		if err := rows.Err(); err != nil {
			_ = results.Close()
			return nil, false, dbError("enqueue "+job.Kind, err)
		}
		if err := results.Close(); err != nil {
			return nil, false, dbError("enqueue "+job.Kind, err)
		}
		if found != nil {
			return found, foundDup, nil
		}
	}
	return nil, false, fmt.Errorf("pgqueue: enqueue %s: unique job neither inserted nor found in %d tries", job.Kind, uniqueAttempts)
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
