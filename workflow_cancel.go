package pgqueue

import (
	"context"
	"fmt"
)

// workflowCancelPage is how many jobs one statement of WorkflowCancel
// cancels.
const workflowCancelPage = 1000

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
	op := fmt.Sprintf("workflow cancel %d", id)
	if err := ctxError(ctx, op); err != nil {
		return nil, err
	}
	if id <= 0 {
		return nil, fmt.Errorf("pgqueue: %s: %w", op, ErrWorkflowNotFound)
	}
	params := &JobListParams{Workflow: id, Limit: workflowCancelPage,
		States: []JobState{StateBlocked, StateScheduled, StateAvailable, StateRunning}}
	out := &JobManyResult{}
	for {
		page, err := c.JobList(ctx, params)
		if err != nil {
			return out, fmt.Errorf("pgqueue: %s: %w", op, err)
		}
		if len(page.Jobs) > 0 {
			ids := make([]int64, len(page.Jobs))
			for i, j := range page.Jobs {
				ids[i] = j.ID
			}
			res, err := c.JobCancelMany(ctx, ids)
			if err != nil {
				return out, fmt.Errorf("pgqueue: %s: %w", op, err)
			}
			out.Changed = append(out.Changed, res.Changed...)
			out.CancelRequested = append(out.CancelRequested, res.CancelRequested...)
			// Jobs deleted since the read are gone, as if they had ended.
			out.Unchanged = append(append(out.Unchanged, res.Unchanged...), res.NotFound...)
		}
		if page.NextCursor == "" {
			break
		}
		params.Cursor = page.NextCursor
	}
	if len(out.Changed)+len(out.CancelRequested)+len(out.Unchanged) == 0 {
		// Nothing left to cancel: a workflow whose jobs all ended, or none.
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
