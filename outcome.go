package pgqueue

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// jobOutcome is what reading a job back tells a writer holding fence.
type jobOutcome int

const (
	outcomePending jobOutcome = iota // still running under our fence: the write did not land
	outcomeLanded                    // our fence, no longer running: a write of ours landed
	outcomeLost                      // another fence, or gone: the job was taken over
)

// storedJob is a job's state and fence as read back.
type storedJob struct {
	state JobState
	fence int64
}

func (s storedJob) of(fence int64) jobOutcome {
	switch {
	case s.fence != fence:
		return outcomeLost
	case s.state == StateRunning:
		return outcomePending
	default:
		return outcomeLanded
	}
}

// outcomeReader reads jobs back by id (sql/job_outcomes.sql) to learn
// whether a write whose reply was lost landed: the completer after an
// unknown outcome, the executor after a handler's CompleteTx.
type outcomeReader struct {
	pool *pgxpool.Pool
	q    *queries
	// base is the parent of its reads, detached from Stop.
	base context.Context
}

// read returns the state and fence of each job in ids that exists.
func (r *outcomeReader) read(ids []int64) (map[int64]storedJob, error) {
	ctx, cancel := context.WithTimeout(r.base, writeTimeout)
	defer cancel()
	rows, err := r.pool.Query(ctx, r.q.jobOutcomes, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64]storedJob, len(ids))
	for rows.Next() {
		var id int64
		var state string
		var fence *int64
		if err := rows.Scan(&id, &state, &fence); err != nil {
			return nil, err
		}
		s := storedJob{state: JobState(state)}
		if fence != nil {
			s.fence = *fence
		}
		out[id] = s
	}
	return out, rows.Err()
}

// landed reports whether a write by row's fence holder already ended the
// job, such as the handler's own CompleteTx.
func (r *outcomeReader) landed(row *JobRow) bool {
	states, err := r.read([]int64{row.ID})
	return err == nil && states[row.ID].of(row.Fence) == outcomeLanded
}
