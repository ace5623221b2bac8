package pgqueue

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pgqueue/pgqueue/internal/jobsql"
)

// The page sizes of JobList.
const (
	// 100 is the page size of JobList when
	// JobListParams.Limit is zero.
	defaultJobListLimit = 100
	// MaxJobListLimit is the largest JobListParams.Limit JobList accepts.
	MaxJobListLimit = 10_000
)

// JobListOrder is the column JobList orders jobs by. Ties are broken by
// id, in the same direction, so the order is total and the cursor exact.
type JobListOrder string

// The orderings of JobList.
const (
	// JobListOrderID orders by id: the order of insertion. The default.
	JobListOrderID JobListOrder = "id"
	// JobListOrderCreatedAt orders by created_at.
	JobListOrderCreatedAt JobListOrder = "created_at"
	// JobListOrderRunAt orders by run_at: when the job is or was due.
	JobListOrderRunAt JobListOrder = "run_at"
	// JobListOrderFinalizedAt orders by finalized_at, and lists only
	// finalized jobs (completed, discarded or cancelled): the others have
	// no place in that order.
	JobListOrderFinalizedAt JobListOrder = "finalized_at"
)

// JobListParams selects and orders the jobs JobList returns. Every filter
// is optional (the zero value or an empty list does not filter), and a job
// is listed when it passes all of them. docs/guides/reading-jobs.md ("What is
// index-backed") says which combinations an index serves on a large table.
type JobListParams struct {
	// IDs lists only these jobs.
	IDs []int64
	// Queues lists only jobs of these queues.
	Queues []string
	// Kinds lists only jobs of these kinds.
	Kinds []string
	// States lists only jobs in these states. A value that is not one of
	// the seven states is ErrInvalid.
	States []JobState
	// Tags lists only jobs that carry all of these tags.
	Tags []string
	// CreatedFrom and CreatedBefore list only jobs created at or after
	// CreatedFrom and before CreatedBefore.
	CreatedFrom, CreatedBefore time.Time
	// FinalizedFrom and FinalizedBefore list only jobs finalized at or
	// after FinalizedFrom and before FinalizedBefore: a job that is not
	// final passes neither.
	FinalizedFrom, FinalizedBefore time.Time
	// ArgsContain lists only jobs whose args contain it, by PostgreSQL's
	// jsonb containment (args @> ArgsContain): {"customer_id": 42} matches
	// the args {"customer_id": 42, "order_id": 7}. It is encoded with
	// encoding/json and must encode to a JSON object (a json.RawMessage
	// is taken as it is); anything else is ErrInvalid. Combine it
	// with Kinds or a range on a large table: no index serves it by
	// default.
	ArgsContain any
	// Workflow lists only the jobs of this workflow
	// (EnqueueManyResult.Workflow), read through the workflow's index:
	// with JobCancelMany or JobRetryMany, what acts on a whole workflow.
	// Zero: no filter; negative is ErrInvalid.
	Workflow int64

	// OrderBy is the ordering, JobListOrderID when empty.
	OrderBy JobListOrder
	// Descending reverses the ordering: newest first for ids and times.
	Descending bool
	// Limit is the page size: 100 when zero, at most
	// MaxJobListLimit. Out of range is ErrInvalid.
	Limit int
	// Cursor continues after the page that returned it as
	// JobListResult.NextCursor; empty starts at the beginning. It must
	// come from a call with the same OrderBy and Descending, or JobList
	// returns ErrInvalid. The filters may differ from call to call.
	Cursor string
}

// JobListResult is a page of JobList.
type JobListResult struct {
	// Jobs are the page's jobs, in the requested order.
	Jobs []*JobRow
	// NextCursor continues after the last of Jobs (pass it as
	// JobListParams.Cursor); empty when no job follows.
	NextCursor string
}

// JobList returns a page of the jobs that pass params' filters, in its
// order, and the cursor of the next page. A nil params lists every job by
// id, a page of 100.
//
// Pages are read by keyset, not offset: each continues after the last
// row of the one before, so a page costs the same however deep it is, and
// paging through a table that jobs are being inserted into returns each
// job that existed at the start exactly once. A job whose sort value
// changes while it is paged through (run_at of a retried job,
// finalized_at of a job that finishes) may be returned twice or not at
// all, as in any keyset pagination.
func (c *Client) JobList(ctx context.Context, params *JobListParams) (*JobListResult, error) {
	if params == nil {
		params = &JobListParams{}
	}
	order := cmp.Or(params.OrderBy, JobListOrderID)
	query, ok := c.q.JobListBy[jobsql.JobListKey{Order: string(order), Desc: params.Descending}]
	if !ok {
		return nil, fmt.Errorf("pgqueue: job list: %w option: unknown ordering %q", ErrInvalid, params.OrderBy)
	}
	limit := params.Limit
	if limit == 0 {
		limit = defaultJobListLimit
	}
	if limit < 0 || limit > MaxJobListLimit {
		return nil, fmt.Errorf("pgqueue: job list: %w option: limit %d is not between 1 and %d", ErrInvalid, params.Limit, MaxJobListLimit)
	}
	var workflow any // NULL: no filter
	switch {
	case params.Workflow < 0:
		return nil, fmt.Errorf("pgqueue: job list: %w option: workflow %d is not a workflow id", ErrInvalid, params.Workflow)
	case params.Workflow > 0:
		workflow = params.Workflow
	}
	states, err := jobListStates(params.States)
	if err != nil {
		return nil, err
	}
	args, err := jobListArgs(params.ArgsContain)
	if err != nil {
		return nil, err
	}
	var after jobListCursor
	if params.Cursor != "" {
		if after, err = decodeJobListCursor(params.Cursor, order, params.Descending); err != nil {
			return nil, fmt.Errorf("pgqueue: job list: %w", err)
		}
	}
	var afterAt, afterID any
	if after.ID != 0 {
		afterAt, afterID = after.at(), after.ID
	}
	// One row more than the page tells whether a next page exists.
	rows, err := c.pool.Query(ctx, query, jobsql.OneShotPlan,
		nilIfEmpty(params.IDs), nilIfEmpty(params.Queues), nilIfEmpty(params.Kinds), states, nilIfEmpty(params.Tags),
		nilIfZero(params.CreatedFrom), nilIfZero(params.CreatedBefore),
		nilIfZero(params.FinalizedFrom), nilIfZero(params.FinalizedBefore),
		args, limit+1, afterAt, afterID, workflow)
	if err != nil {
		return nil, dbError("job list", err)
	}
	jobs, err := collectFullJobRows(rows)
	if err != nil {
		return nil, dbError("job list", err)
	}
	res := &JobListResult{Jobs: jobs}
	if len(jobs) > limit {
		res.Jobs = jobs[:limit]
		res.NextCursor = newJobListCursor(order, params.Descending, jobs[limit-1]).encode()
	}
	return res, nil
}

// jobListStates checks states and returns them as the statement's text[]
// parameter, nil when empty.
func jobListStates(states []JobState) ([]string, error) {
	if len(states) == 0 {
		return nil, nil
	}
	out := make([]string, len(states))
	for i, s := range states {
		switch s {
		case StateBlocked, StateScheduled, StateAvailable, StateRunning, StateCompleted, StateDiscarded, StateCancelled:
		default:
			return nil, fmt.Errorf("pgqueue: job list: %w option: unknown job state %q", ErrInvalid, s)
		}
		out[i] = string(s)
	}
	return out, nil
}

// jobListArgs encodes ArgsContain as the statement's jsonb parameter: nil
// when absent, a JSON object otherwise.
func jobListArgs(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("pgqueue: job list: %w option: args filter: %v", ErrInvalid, err)
	}
	if !bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		return nil, fmt.Errorf("pgqueue: job list: %w option: args filter %s is not a JSON object", ErrInvalid, b)
	}
	return string(b), nil
}

// nilIfEmpty passes an empty list as NULL: no filter.
func nilIfEmpty[T any](s []T) any {
	if len(s) == 0 {
		return nil
	}
	return s
}

// nilIfZero passes a zero time as NULL: no bound.
func nilIfZero(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
