package pgqueue

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/jobsql"
)

// uniqueAttempts bounds insertUnique's tries. A try comes back empty only
// when the conflicting job was committed after the statement's snapshot,
// or left its states since; the next try sees it, so two tries nearly
// always do.
const uniqueAttempts = 5

// insertUnique writes one unique job, or finds the equal job that blocks
// it, with its notification, one round trip a try.
func (c *Client) insertUnique(ctx context.Context, db queryer, job *encodedJob) (*EnqueueResult, error) {
	u := job.unique
	for range uniqueAttempts {
		batch := &pgx.Batch{}
		// JSON as text, as in insertJob.
		batch.Queue(c.q.InsertUnique, job.queue, job.kind, string(job.args), job.priority, job.maxAttempts, job.runAt, job.tags, string(job.meta), job.singleton,
			u.base, u.periodUS, u.states)
		batch.Queue(c.q.Notify, c.channel, job.queue, job.runAt)
		results := db.SendBatch(ctx, batch)
		rows, err := results.Query()
		if err != nil {
			_ = results.Close()
			return nil, dbError("enqueue "+job.kind, err)
		}
		var res *EnqueueResult
		var s jobsql.Scanner
		for rows.Next() {
			dup, row, err := s.ScanFlagged(rows)
			if err != nil {
				rows.Close()
				_ = results.Close()
				return nil, dbError("enqueue "+job.kind, err)
			}
			res = &EnqueueResult{JobRow: row, Duplicate: dup}
		}
		if err := rows.Err(); err != nil {
			_ = results.Close()
			return nil, dbError("enqueue "+job.kind, err)
		}
		if err := results.Close(); err != nil {
			return nil, dbError("enqueue "+job.kind, err)
		}
		if res != nil {
			return res, nil
		}
	}
	return nil, fmt.Errorf("pgqueue: enqueue %s: unique job neither inserted nor found in %d tries", job.kind, uniqueAttempts)
}

// uniqueChunk is the most jobs insertManyUnique writes in one statement.
const uniqueChunk = 1000

// insertManyUnique writes a batch that holds unique jobs, in statements of
// uniqueChunk jobs, with its notifications. A later chunk's job that
// equals an earlier chunk's conflicts with it in the table, so duplicates
// across chunks are found too.
func (c *Client) insertManyUnique(ctx context.Context, tx pgx.Tx, jobs []*encodedJob) (*EnqueueManyResult, error) {
	res := &EnqueueManyResult{}
	for start := 0; start < len(jobs); start += uniqueChunk {
		chunk := jobs[start:min(start+uniqueChunk, len(jobs))]
		inserted, err := c.insertUniqueChunk(ctx, tx, chunk)
		if err != nil {
			return nil, err
		}
		for i, j := range chunk {
			if j.unique == nil || inserted[i] {
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
func (c *Client) insertUniqueChunk(ctx context.Context, tx pgx.Tx, chunk []*encodedJob) (map[int]bool, error) {
	cols, err := newJobColumns(chunk)
	if err != nil {
		return nil, err
	}
	// states are jsonb, so text (see jobColumns); bases are bytea.
	bases, periods, states := make([][]byte, len(chunk)), make([]int64, len(chunk)), make([]*string, len(chunk))
	for i, j := range chunk {
		if u := j.unique; u != nil {
			bases[i], periods[i] = u.base, u.periodUS
			b, err := json.Marshal(u.states)
			if err != nil {
				return nil, err
			}
			s := string(b)
			states[i] = &s
		}
	}
	batch := &pgx.Batch{}
	batch.Queue(c.q.InsertManyUnique, append(cols.args(), bases, periods, states)...)
	batch.Queue(c.q.NotifyDue, c.channel, cols.queues, cols.runAts)
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
