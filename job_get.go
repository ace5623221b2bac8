package pgqueue

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// JobGet returns the job with the given id, every column JobRow holds
// (output, progress and cancel request included). It returns
// ErrJobNotFound when no job has the id: it never existed, or it was
// deleted (by JobDelete or by retention).
func (c *Client) JobGet(ctx context.Context, id int64) (*JobRow, error) {
	rows, err := c.pool.Query(ctx, c.q.JobGet, id)
	if err != nil {
		return nil, dbError("job get", err)
	}
	jobs, err := collectFullJobRows(rows)
	if err != nil {
		return nil, dbError("job get", err)
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("pgqueue: job get %d: %w", id, ErrJobNotFound)
	}
	return jobs[0], nil
}

// collectFullJobRows reads rows as job_get.sql and job_list.sql return
// them, with one jobFullScanner.
func collectFullJobRows(rows pgx.Rows) ([]*JobRow, error) {
	defer rows.Close()
	var s jobFullScanner
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

// jobFullScanner reads every column of JobRow. The claim's jobsql.Scanner reads
// fewer: a claimed job has no cancel request, output or progress yet, and
// the hot path should not carry them.
type jobFullScanner struct {
	state                                string
	fence                                pgtype.Int8
	leaseUntil, attemptedAt, finalizedAt pgtype.Timestamptz
	cancelRequestedAt                    pgtype.Timestamptz
	workerID, singleton                  pgtype.Text
	partition, sequence                  pgtype.Text
	errs                                 []byte
	dest                                 []any
}

func (s *jobFullScanner) scan(row pgx.Row, lead ...any) (*JobRow, error) {
	j := &JobRow{}
	s.dest = append(append(s.dest[:0], lead...), &j.ID, &j.Queue, &j.Kind, &j.EncodedArgs, &j.Priority, &s.state, &j.Attempt, &j.MaxAttempts,
		&j.RunAt, &s.fence, &s.leaseUntil, &s.workerID, &s.errs, &j.Tags, &j.Meta,
		&j.CreatedAt, &s.attemptedAt, &s.finalizedAt, &s.singleton, &s.partition, &s.sequence,
		&s.cancelRequestedAt, &j.Output, &j.Progress)
	if err := row.Scan(s.dest...); err != nil {
		return nil, err
	}
	j.State = JobState(s.state)
	j.Fence = s.fence.Int64
	j.LeaseUntil, j.AttemptedAt, j.FinalizedAt = s.leaseUntil.Time, s.attemptedAt.Time, s.finalizedAt.Time
	j.CancelRequestedAt = s.cancelRequestedAt.Time
	j.WorkerID, j.SingletonKey = s.workerID.String, s.singleton.String
	j.PartitionKey, j.SequenceKey = s.partition.String, s.sequence.String
	if string(s.errs) != "[]" {
		if err := json.Unmarshal(s.errs, &j.Errors); err != nil {
			return nil, fmt.Errorf("decode errors of job %d: %w", j.ID, err)
		}
	}
	return j, nil
}
