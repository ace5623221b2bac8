package pgqueue

import (
	"context"
	"fmt"
)

// workflowPage is how many jobs one statement of WorkflowCancel or
// WorkflowRetry changes.
const workflowPage = 1000

// WorkflowCancel cancels every job of workflow id that has not ended, as
// JobCancelMany does: blocked, scheduled and available jobs are cancelled
// at once (Changed), running ones have their cancel requested and their
// holders told (CancelRequested), and a job that ended or was deleted
// between the read and the cancel is left as it is (Unchanged). Jobs that
// had ended before the call are not in the result, nor are those a
// cancelled job cancels in turn (the jobs waiting for it under
// ParentFailureCancel, the default, cancelled in its statement before
// their own page comes). It returns ErrWorkflowNotFound when no job
// belongs to id.
//
// The workflow's jobs are read through its index and cancelled a page of
// 1,000 at a time, in id order, each page in its own transaction, so a
// workflow of any size holds no long transaction. The pages are not one
// snapshot: a job added to the workflow behind the pages is not
// cancelled, and one that a cancelled parent released (ParentFailureRun)
// may start before its page comes, which then asks its worker to stop
// it. A page PostgreSQL fails to break a deadlock is run again (see
// JobCancelMany); a page that fails otherwise stops the call, the pages
// before it stay cancelled, and the call can be repeated.
func (c *Client) WorkflowCancel(ctx context.Context, id int64) (*JobManyResult, error) {
	return c.workflowControl(ctx, "workflow cancel", id,
		[]JobState{StateBlocked, StateScheduled, StateAvailable, StateRunning}, c.JobCancelMany)
}

// WorkflowRetry retries every discarded or cancelled job of workflow id,
// as JobRetryMany does: each becomes available now, or blocked while a job
// it depends on has not completed, so the workflow runs again in its
// order (Changed); a job that left those states between the read and the
// retry is left as it is (Unchanged, or Running). Jobs a retried job
// brings back before their own page comes (those its failure cancelled,
// as JobRetry resumes them) are not listed. It returns ErrWorkflowNotFound
// when no job belongs to id, and an empty result when none failed.
//
// Pages of 1,000 jobs in id order, each in its own transaction, as
// WorkflowCancel's.
func (c *Client) WorkflowRetry(ctx context.Context, id int64) (*JobManyResult, error) {
	return c.workflowControl(ctx, "workflow retry", id, []JobState{StateDiscarded, StateCancelled}, c.JobRetryMany)
}

// workflowControl runs act on the ids of workflow id's jobs in states, a
// page of workflowPage in id order at a time, and gathers what it did.
func (c *Client) workflowControl(ctx context.Context, verb string, id int64, states []JobState,
	act func(context.Context, []int64) (*JobManyResult, error)) (*JobManyResult, error) {
	op := fmt.Sprintf("%s %d", verb, id)
	if err := ctxError(ctx, op); err != nil {
		return nil, err
	}
	if id <= 0 {
		return nil, fmt.Errorf("pgqueue: %s: %w", op, ErrWorkflowNotFound)
	}
	params := &JobListParams{Workflow: id, Limit: workflowPage, States: states}
	out := &JobManyResult{}
	read := 0
	for {
		page, err := c.JobList(ctx, params)
		if err != nil {
			return out, fmt.Errorf("pgqueue: %s: %w", op, err)
		}
		read += len(page.Jobs)
		if len(page.Jobs) > 0 {
			ids := make([]int64, len(page.Jobs))
			for i, j := range page.Jobs {
				ids[i] = j.ID
			}
			res, err := act(ctx, ids)
			if err != nil {
				return out, fmt.Errorf("pgqueue: %s: %w", op, err)
			}
			out.Changed = append(out.Changed, res.Changed...)
			out.CancelRequested = append(out.CancelRequested, res.CancelRequested...)
			out.Running = append(out.Running, res.Running...)
			// Jobs deleted since the read are gone, as if they had ended.
			out.Unchanged = append(append(out.Unchanged, res.Unchanged...), res.NotFound...)
		}
		if page.NextCursor == "" {
			break
		}
		params.Cursor = page.NextCursor
	}
	if read == 0 {
		// Nothing to act on: a workflow with no job in states, or none.
		first, err := c.JobList(ctx, &JobListParams{Workflow: id, Limit: 1})
		if err != nil {
			return out, fmt.Errorf("pgqueue: %s: %w", op, err)
		}
		if len(first.Jobs) == 0 {
			return nil, fmt.Errorf("pgqueue: %s: %w", op, ErrWorkflowNotFound)
		}
	}
	return out, nil
}
