package pgqueue

import (
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

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
	return s.scanAfter(row)
}

// scanFlagged reads a row whose job columns follow a leading boolean, as
// insert_unique.sql returns them.
func (s *jobScanner) scanFlagged(row pgx.CollectableRow) (flag bool, _ *JobRow, err error) {
	j, err := s.scanAfter(row, &flag)
	return flag, j, err
}

// scanAfter reads the job columns after the columns of lead.
func (s *jobScanner) scanAfter(row pgx.Row, lead ...any) (*JobRow, error) {
	j := &JobRow{}
	s.dest = append(append(s.dest[:0], lead...), &j.ID, &j.Queue, &j.Kind, &j.EncodedArgs, &j.Priority, &s.state, &j.Attempt, &j.MaxAttempts,
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
