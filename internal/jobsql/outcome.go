package jobsql

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// WriteOutcome is what reading a job back tells a writer holding fence.
type WriteOutcome int

const (
	OutcomePending WriteOutcome = iota // still running under our fence: the write did not land
	OutcomeLanded                      // our fence, no longer running: a write of ours landed
	OutcomeLost                        // another fence, or gone: the job was taken over
)

// StoredJob is a job's state and fence as read back.
type StoredJob struct {
	State pgqueuetype.JobState
	Fence int64
}

func (s StoredJob) Of(fence int64) WriteOutcome {
	switch {
	case s.Fence != fence:
		return OutcomeLost
	case s.State == pgqueuetype.StateRunning:
		return OutcomePending
	default:
		return OutcomeLanded
	}
}

// OutcomeReader reads jobs back by id (sql/job_outcomes.sql) to learn
// whether a write whose reply was lost landed: the completer after an
// unknown outcome, the executor after a handler's CompleteTx.
type OutcomeReader struct {
	Pool *pgxpool.Pool
	Q    *Queries
	// Base is the parent of its reads, detached from Stop.
	Base context.Context
}

// Read returns the state and fence of each job in ids that exists.
func (r *OutcomeReader) Read(ids []int64) (map[int64]StoredJob, error) {
	ctx, cancel := context.WithTimeout(r.Base, WriteTimeout)
	defer cancel()
	rows, err := r.Pool.Query(ctx, r.Q.JobOutcomes, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64]StoredJob, len(ids))
	for rows.Next() {
		var id int64
		var state string
		var fence *int64
		if err := rows.Scan(&id, &state, &fence); err != nil {
			return nil, err
		}
		s := StoredJob{State: pgqueuetype.JobState(state)}
		if fence != nil {
			s.Fence = *fence
		}
		out[id] = s
	}
	return out, rows.Err()
}

// Landed reports whether a write by row's fence holder already ended the
// job, such as the handler's own CompleteTx.
func (r *OutcomeReader) Landed(row *pgqueuetype.JobRow) bool {
	states, err := r.Read([]int64{row.ID})
	return err == nil && states[row.ID].Of(row.Fence) == OutcomeLanded
}
