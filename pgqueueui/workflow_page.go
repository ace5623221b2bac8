package pgqueueui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgqueue/pgqueue"
)

// --- workflows: jobs that wait for other jobs ---

const (
	// workflowPageSize is how many of a workflow's jobs one page lists. A
	// workflow may hold pgqueue.MaxWorkflowJobs jobs, and WorkflowGet
	// reads every one with its args: the page reads its own keyset pages
	// instead.
	workflowPageSize = 100
	// rowDepsShown is how many of a job's parents its row on the
	// workflow's page names; the others are counted.
	rowDepsShown = 8
	// jobDepsShown is how many parents, and how many children, a job's
	// page names; the others are counted.
	jobDepsShown = 50
	// recentWorkflowsShown is how many workflows the lookup page lists.
	recentWorkflowsShown = 20
)

// workflowStates are the states in the order the pages count them: the
// way a job goes, then how it ended.
var workflowStates = []pgqueue.JobState{pgqueue.StateBlocked, pgqueue.StateScheduled, pgqueue.StateAvailable,
	pgqueue.StateRunning, pgqueue.StateCompleted, pgqueue.StateDiscarded, pgqueue.StateCancelled}

// dep is one end of a dependency edge: the job at the other end, its
// state ("" when it was deleted meanwhile), and the edge's policy and
// whether it still holds the child.
type dep struct {
	ID        int64
	State     pgqueue.JobState
	OnFailure string
	Resolved  bool
}

// Policy is the edge's policy when it is not the default, for display.
func (d dep) Policy() string {
	if d.OnFailure == string(pgqueue.ParentFailureCancel) {
		return ""
	}
	return d.OnFailure
}

type stateCount struct {
	State pgqueue.JobState
	N     int
}

// workflowJob is a job's row on its workflow's page.
type workflowJob struct {
	ID                   int64
	Queue, Kind          string
	State                pgqueue.JobState
	Attempt, MaxAttempts int
	Parents, Pending     int   // jobs it depends on; those still holding it
	Shown                []dep // the first rowDepsShown of them
}

// More is how many of its parents the row does not name.
func (j *workflowJob) More() int { return j.Parents - len(j.Shown) }

type workflowData struct {
	ID     int64
	Done   bool
	Failed int    // jobs discarded or cancelled: what a retry takes
	Note   string // what an action just did (doneMessages)
	Total  int
	Counts []stateCount
	Jobs   []*workflowJob
	After  int64 // the id the page starts after; 0 on the first
	Next   int64 // the after of the next page; 0 on the last
	Shown  int   // jobs on the pages up to this one
}

// errNoWorkflow is loadWorkflow's answer when no job belongs to the id.
var errNoWorkflow = errors.New("no such workflow")

// loadWorkflow reads workflow id's counts and the page of its jobs after
// job id after, in one snapshot, so that the counts and the page agree.
func (h *Handler) loadWorkflow(ctx context.Context, id, after int64) (*workflowData, error) {
	d := &workflowData{ID: id, After: after, Done: true}
	err := pgx.BeginTxFunc(ctx, h.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, h.q.workflowCounts, id)
		if err != nil {
			return fmt.Errorf("workflow counts: %w", err)
		}
		counts := map[pgqueue.JobState]int{}
		var state string
		var n int
		if _, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error {
			counts[pgqueue.JobState(state)] = n
			return nil
		}); err != nil {
			return fmt.Errorf("workflow counts: %w", err)
		}
		if len(counts) == 0 {
			return errNoWorkflow
		}
		for _, s := range workflowStates {
			if n := counts[s]; n > 0 {
				d.Counts = append(d.Counts, stateCount{s, n})
				d.Total += n
				d.Done = d.Done && s.Final()
				if s == pgqueue.StateDiscarded || s == pgqueue.StateCancelled {
					d.Failed += n
				}
			}
		}

		rows, err = tx.Query(ctx, h.q.workflowPage, id, after, workflowPageSize+1)
		if err != nil {
			return fmt.Errorf("workflow jobs: %w", err)
		}
		var j workflowJob
		if _, err := pgx.ForEachRow(rows, []any{&j.ID, &j.Queue, &j.Kind, &state, &j.Attempt, &j.MaxAttempts, &j.Parents, &j.Pending}, func() error {
			j.State = pgqueue.JobState(state)
			c := j
			d.Jobs = append(d.Jobs, &c)
			return nil
		}); err != nil {
			return fmt.Errorf("workflow jobs: %w", err)
		}
		if len(d.Jobs) > workflowPageSize {
			d.Jobs = d.Jobs[:workflowPageSize]
			d.Next = d.Jobs[workflowPageSize-1].ID
		}
		byID := make(map[int64]*workflowJob, len(d.Jobs))
		var ids []int64
		for _, j := range d.Jobs {
			if j.Parents > 0 {
				byID[j.ID] = j
				ids = append(ids, j.ID)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		rows, err = tx.Query(ctx, h.q.workflowPageParents, ids, rowDepsShown)
		if err != nil {
			return fmt.Errorf("workflow dependencies: %w", err)
		}
		var child int64
		var p dep
		var pstate pgtype.Text
		_, err = pgx.ForEachRow(rows, []any{&child, &p.ID, &pstate, &p.OnFailure, &p.Resolved}, func() error {
			p.State = pgqueue.JobState(pstate.String)
			byID[child].Shown = append(byID[child].Shown, p)
			return nil
		})
		if err != nil {
			return fmt.Errorf("workflow dependencies: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// workflow is a workflow's page: its status, its counts by state and a
// page of its jobs, each with the jobs it waits for.
func (h *Handler) workflow(w http.ResponseWriter, r *http.Request) {
	id, ok := parseID(r)
	if !ok {
		h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("invalid workflow id %q: want a whole number above 0", r.PathValue("id")))
		return
	}
	var after int64
	if s := r.URL.Query().Get("after"); s != "" {
		var err error
		if after, err = strconv.ParseInt(s, 10, 64); err != nil || after < 0 {
			h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("invalid after %q: want a job id", s))
			return
		}
	}
	d, err := h.loadWorkflow(r.Context(), id, after)
	switch {
	case errors.Is(err, errNoWorkflow):
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("workflow %d does not exist: no job belongs to it (it never existed, or its jobs were deleted or pruned)", id))
		return
	case err != nil:
		h.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	d.Note = doneMessages[r.URL.Query().Get("done")]
	h.render(w, r, http.StatusOK, "workflow", fmt.Sprintf("Workflow %d", id), d)
}

// workflowActions are the actions on a whole workflow, by path.
var workflowActions = map[string]string{"cancel": "Cancel", "retry": "Retry"}

// confirmWorkflowAction asks before cancelling or retrying a workflow: GET
// shows the question, only its POST acts.
func (h *Handler) confirmWorkflowAction(w http.ResponseWriter, r *http.Request) {
	action, verb, id, ok := h.actionOn(w, r, workflowActions)
	if !ok {
		return
	}
	what := fmt.Sprintf("every job of workflow %d that has not ended", id)
	if action == "retry" {
		what = fmt.Sprintf("every discarded or cancelled job of workflow %d", id)
	}
	h.render(w, r, http.StatusOK, "confirm", verb+" workflow", &confirmData{
		Verb: verb, What: what, Action: fmt.Sprintf("/workflows/%d/%s", id, action), Back: fmt.Sprintf("/workflows/%d", id),
	})
}

// workflowAction cancels what of a workflow has not ended
// (Client.WorkflowCancel) or retries what of it failed
// (Client.WorkflowRetry), and goes back to its page.
func (h *Handler) workflowAction(w http.ResponseWriter, r *http.Request) {
	action, _, id, ok := h.actionOn(w, r, workflowActions)
	if !ok {
		return
	}
	act := h.client.WorkflowCancel
	if action == "retry" {
		act = h.client.WorkflowRetry
	}
	_, err := act(r.Context(), id)
	switch {
	case errors.Is(err, pgqueue.ErrWorkflowNotFound):
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("workflow %d does not exist", id))
	case err != nil:
		h.fail(w, r, http.StatusInternalServerError, err.Error())
	default:
		http.Redirect(w, r, fmt.Sprintf("%s/workflows/%d?done=%s-workflow", h.prefix, id, action), http.StatusSeeOther)
	}
}

type workflowsData struct {
	Recent []int64
	ID     string // what was typed into the lookup form
	Error  string
}

// workflows is the lookup: a form that takes a workflow id to its page,
// and the newest workflows.
func (h *Handler) workflows(w http.ResponseWriter, r *http.Request) {
	d := &workflowsData{}
	status := http.StatusOK
	if d.ID = strings.TrimSpace(r.URL.Query().Get("id")); d.ID != "" {
		id, err := strconv.ParseInt(d.ID, 10, 64)
		if err == nil && id > 0 {
			http.Redirect(w, r, fmt.Sprintf("%s/workflows/%d", h.prefix, id), http.StatusSeeOther)
			return
		}
		d.Error = fmt.Sprintf("invalid workflow id %q: want a whole number above 0", d.ID)
		status = http.StatusBadRequest
	}
	rows, err := h.pool.Query(r.Context(), h.q.recentWorkflows, recentWorkflowsShown)
	if err == nil {
		d.Recent, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if err != nil {
		h.fail(w, r, http.StatusInternalServerError, "workflows: "+err.Error())
		return
	}
	h.render(w, r, status, "workflows", "Workflows", d)
}

// jobLinks are a job's workflow and dependencies, for its page.
type jobLinks struct {
	Workflow                    int64 // 0 outside a workflow
	ParentsTotal, ChildrenTotal int
	Parents, Children           []dep
	MoreParents, MoreChildren   int
}

// loadJobLinks reads job id's workflow and the jobs on both sides of its
// dependencies. A job deleted since it was read has none.
func (h *Handler) loadJobLinks(ctx context.Context, id int64) (*jobLinks, error) {
	l := &jobLinks{}
	var wf pgtype.Int8
	err := h.pool.QueryRow(ctx, h.q.jobWorkflow, id).Scan(&wf, &l.ParentsTotal, &l.ChildrenTotal)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, nil
	}
	if err != nil {
		return nil, fmt.Errorf("job workflow: %w", err)
	}
	l.Workflow = wf.Int64
	if l.ParentsTotal+l.ChildrenTotal == 0 {
		return l, nil
	}
	rows, err := h.pool.Query(ctx, h.q.jobDeps, id, jobDepsShown)
	if err != nil {
		return nil, fmt.Errorf("job dependencies: %w", err)
	}
	var dir string
	var d dep
	var state pgtype.Text
	_, err = pgx.ForEachRow(rows, []any{&dir, &d.ID, &state, &d.OnFailure, &d.Resolved}, func() error {
		d.State = pgqueue.JobState(state.String)
		if dir == "parent" {
			l.Parents = append(l.Parents, d)
		} else {
			l.Children = append(l.Children, d)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("job dependencies: %w", err)
	}
	l.MoreParents = max(0, l.ParentsTotal-len(l.Parents))
	l.MoreChildren = max(0, l.ChildrenTotal-len(l.Children))
	return l, nil
}

// jobsWorkflows returns the workflow of each job of jobs that has one.
func (h *Handler) jobsWorkflows(ctx context.Context, jobs []*pgqueue.JobRow) (map[int64]int64, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	rows, err := h.pool.Query(ctx, h.q.jobsWorkflows, ids)
	if err != nil {
		return nil, fmt.Errorf("workflows of jobs: %w", err)
	}
	out := map[int64]int64{}
	var id, wf int64
	_, err = pgx.ForEachRow(rows, []any{&id, &wf}, func() error {
		out[id] = wf
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("workflows of jobs: %w", err)
	}
	return out, nil
}
