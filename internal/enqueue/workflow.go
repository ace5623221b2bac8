package enqueue

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// The limits of workflows: the most jobs one job may depend on, and the
// most jobs one workflow may hold. The first allows a fan-in of ten
// thousand jobs into one; the second keeps a workflow's insert (one
// statement, one transaction) and its status read bounded.
const (
	MaxJobDependencies = 10_000
	MaxWorkflowJobs    = 100_000
)

// The failure policies of a dependency, as job_deps.on_failure stores
// them.
const (
	PolicyCancel = "cancel"
	PolicyRun    = "run"
	PolicyWait   = "wait"
)

// Dep is one job a job depends on: exactly one of JobID (a job in the
// table), Index (a position in the same batch) or Name (the Params.Name of
// a job of the same batch).
type Dep struct {
	JobID int64
	// Index is a position in the batch; -1 when the dependency is by
	// JobID or Name.
	Index int
	Name  string
	// OnFailure is the dependency's policy; empty means the job's
	// Params.OnParentFailure.
	OnFailure string
}

// IsWorkflow reports whether p takes part in a workflow: it depends on
// jobs, is named for others to depend on, or joins a workflow.
func (p *Params) IsWorkflow() bool {
	return len(p.DependsOn) > 0 || p.Name != "" || p.Workflow != 0
}

// wfJob is what a workflow write keeps of each job besides its columns.
type wfJob struct {
	name      string
	deps      []Dep
	policy    string
	workflow  int64
	available bool // due now: its queue is notified when it is not blocked
	sequence  bool // has a sequence key
}

// wfEdge is one dependency resolved: parent is a position in the batch
// (inBatch) or a job id.
type wfEdge struct {
	parent  int64
	inBatch bool
	policy  string
}

// Workflow checks and writes the jobs of src, some of which depend on
// others (of the batch, by position or name, or in the table, by id),
// inside tx, all or none: it works in a savepoint of tx, rolled back on
// any error, so a refused batch writes nothing. Dependencies that form a
// cycle (ErrDependencyCycle), name a job that does not exist
// (ErrDependencyNotFound) or pass the limits (ErrWorkflowLimit) are
// refused before anything is written.
func (w *Writer) Workflow(ctx context.Context, tx pgx.Tx, src Source) (Result, error) {
	n := src.N
	if n > MaxWorkflowJobs {
		return Result{}, fmt.Errorf("enqueue workflow: %d jobs, at most %d in a workflow: %w", n, MaxWorkflowJobs, pgqueuetype.ErrWorkflowLimit)
	}
	cols := newJobColumns(n)
	jobs := make([]wfJob, n)
	var p Params
	var job Job
	for i := range n {
		err := src.Params(i, &p)
		if err == nil && p.Unique != nil {
			err = fmt.Errorf("%w job options: a job of a batch with dependencies cannot be unique", pgqueuetype.ErrInvalid)
		}
		if err == nil {
			err = w.Encode(&p, "", &job)
		}
		if err == nil {
			err = cols.set(i, &job)
		}
		if err != nil {
			return Result{}, fmt.Errorf("job %d: %w", i, err)
		}
		jobs[i] = wfJob{name: p.Name, deps: p.DependsOn, policy: p.OnParentFailure, workflow: p.Workflow, available: job.RunAt.IsZero(),
			sequence: job.SequenceKey != ""}
	}
	edges, err := resolveDeps(jobs)
	if err != nil {
		return Result{}, err
	}
	if err := checkSequenceOrder(jobs, edges); err != nil {
		return Result{}, err
	}
	order, err := topoOrder(n, edges)
	if err != nil {
		return Result{}, err
	}
	workflow, err := joinedWorkflow(jobs)
	if err != nil {
		return Result{}, err
	}

	sp, err := tx.Begin(ctx)
	if err != nil {
		return Result{}, dbError("enqueue workflow: savepoint", err)
	}
	defer func() { _ = sp.Rollback(context.WithoutCancel(ctx)) }()

	parents, err := w.lockParents(ctx, sp, edges)
	if err != nil {
		return Result{}, err
	}
	for _, pr := range parents {
		if pr.workflow == 0 {
			continue
		}
		if workflow != 0 && workflow != pr.workflow {
			return Result{}, fmt.Errorf("%w job options: the batch joins workflow %d, but job %d it depends on belongs to workflow %d",
				pgqueuetype.ErrInvalid, workflow, pr.id, pr.workflow)
		}
		workflow = pr.workflow
	}

	var ids []int64
	var wfID, held int64
	var joined *int64
	if workflow != 0 {
		joined = &workflow
	}
	if err := sp.QueryRow(ctx, w.Q.WorkflowReserve, n, joined).Scan(&ids, &wfID, &held); err != nil {
		return Result{}, dbError("enqueue workflow: reserve ids", err)
	}
	if held+int64(n) > MaxWorkflowJobs {
		return Result{}, fmt.Errorf("enqueue workflow: workflow %d holds %d jobs, %d more would pass the limit of %d: %w",
			wfID, held, n, MaxWorkflowJobs, pgqueuetype.ErrWorkflowLimit)
	}
	if joined != nil && held == 0 && len(parents) == 0 {
		return Result{}, fmt.Errorf("enqueue workflow %d: %w", workflow, pgqueuetype.ErrWorkflowNotFound)
	}

	// Each job's state, parents first: pending counts the edges that still
	// hold it; cancelled, a parent that failed already under "cancel".
	pending := make([]*int32, n)
	hasChildren := make([]bool, n)
	cancelled := make([]bool, n)
	var parentIDs, childIDs []int64
	var policies []string
	var resolved []bool
	gates := make([]*int64, n)
	var gateParents []int64
	var gateQueues []string
	gateSeen := map[wfGate]bool{}
	for _, i := range order {
		if len(edges[i]) == 0 {
			continue
		}
		var count int32
		for _, e := range edges[i] {
			var state pgqueuetype.JobState
			parentID := e.parent
			if e.inBatch {
				hasChildren[e.parent] = true
				parentID = ids[e.parent]
				if cancelled[e.parent] {
					state = pgqueuetype.StateCancelled
				}
			} else {
				state = parents[e.parent].state
			}
			done := false
			switch state {
			case pgqueuetype.StateCompleted:
				done = true
			case pgqueuetype.StateDiscarded, pgqueuetype.StateCancelled:
				switch e.policy {
				case PolicyRun:
					done = true
				case PolicyCancel:
					cancelled[i] = true
				}
			}
			if !done {
				count++
			}
			if len(edges[i]) == 1 && e.inBatch && count == 1 && !cancelled[i] && gateable(&jobs[i], e.policy) {
				// Its gate is its edge (migrations/000018_workflow_gates.up.sql).
				gates[i] = &parentID
				if g := (wfGate{parentID, cols.queues[i]}); !gateSeen[g] {
					gateSeen[g] = true
					gateParents, gateQueues = append(gateParents, g.parent), append(gateQueues, g.queue)
				}
				continue
			}
			parentIDs, childIDs = append(parentIDs, parentID), append(childIDs, ids[i])
			policies, resolved = append(policies, e.policy), append(resolved, done)
		}
		pending[i] = &count
	}

	args := append(cols.args(), ids, pending, hasChildren, cancelled, wfID, parentIDs, childIDs, policies, resolved,
		gates, gateParents, gateQueues)
	if _, err := sp.Exec(ctx, w.Q.InsertWorkflow, args...); err != nil {
		return Result{}, dbError("enqueue workflow", err)
	}
	due := map[string]bool{}
	queues := map[string]bool{}
	for i := range n {
		queues[cols.queues[i]] = true
		if jobs[i].available && !cancelled[i] && (pending[i] == nil || *pending[i] == 0) {
			due[cols.queues[i]] = true
		}
	}
	if err := w.notifyQueues(ctx, sp, due); err != nil {
		return Result{}, err
	}
	if err := sp.Commit(ctx); err != nil {
		return Result{}, dbError("enqueue workflow: release savepoint", err)
	}
	return Result{Enqueued: int64(n), Queues: due, IDs: ids, Workflow: wfID}, nil
}

// wfGate is one gate: the children of parent in queue.
type wfGate struct {
	parent int64
	queue  string
}

// gateable says whether a job with one parent, which still holds it,
// waits behind a gate instead of an edge: released by the parent's
// completion without being written, then claimed straight from blocked.
// Only a parent of the same batch opens a gate (the caller checks): a
// job in the table may have completed and been retried, its gate already
// open. Not a job with a run_at ahead (a gate releases it now), nor one of a
// sequence (its claim goes through sequence_next, which claims only
// available jobs), nor one under another policy than cancel (a gate keeps
// no policy).
func gateable(j *wfJob, policy string) bool {
	return j.available && !j.sequence && policy == PolicyCancel
}

// checkSequenceOrder refuses a batch with sequence keys in which a job
// depends on a job listed after it. The batch's ids rise with its
// positions, and a sequence runs its jobs in id order, each after the
// earlier ones (a blocked one too): a job of a sequence that waited,
// directly or through others, for a later job of its own sequence could
// never start, nor could the later job. Listing every job after the jobs
// of the batch it depends on rules that out; without sequence keys the
// order is free.
func checkSequenceOrder(jobs []wfJob, edges [][]wfEdge) error {
	if !slices.ContainsFunc(jobs, func(j wfJob) bool { return j.sequence }) {
		return nil
	}
	for i, es := range edges {
		for _, e := range es {
			if e.inBatch && int(e.parent) > i {
				return fmt.Errorf("job %d: %w job options: depends on job %d, listed after it, in a batch with sequence keys: "+
					"list each job after the jobs of the batch it depends on (a job of a sequence waiting for a later job of its sequence could never start)",
					i, pgqueuetype.ErrInvalid, e.parent)
			}
		}
	}
	return nil
}

// resolveDeps checks each job's dependencies and returns them per job:
// names resolved to positions, policies filled in.
func resolveDeps(jobs []wfJob) ([][]wfEdge, error) {
	names := make(map[string]int)
	for i, j := range jobs {
		if j.name == "" {
			continue
		}
		if k, ok := names[j.name]; ok {
			return nil, fmt.Errorf("job %d: %w job options: name %q already names job %d", i, pgqueuetype.ErrInvalid, j.name, k)
		}
		names[j.name] = i
	}
	edges := make([][]wfEdge, len(jobs))
	for i, j := range jobs {
		if len(j.deps) == 0 {
			continue
		}
		if len(j.deps) > MaxJobDependencies {
			return nil, fmt.Errorf("job %d: depends on %d jobs, at most %d: %w", i, len(j.deps), MaxJobDependencies, pgqueuetype.ErrWorkflowLimit)
		}
		seenBatch := make(map[int]bool, len(j.deps))
		seenID := make(map[int64]bool)
		out := make([]wfEdge, 0, len(j.deps))
		for _, d := range j.deps {
			policy := cmpOr(d.OnFailure, j.policy, PolicyCancel)
			if policy != PolicyCancel && policy != PolicyRun && policy != PolicyWait {
				return nil, fmt.Errorf("job %d: %w job options: unknown parent failure policy %q", i, pgqueuetype.ErrInvalid, policy)
			}
			var e wfEdge
			switch {
			case d.JobID > 0 && d.Index < 0 && d.Name == "":
				if seenID[d.JobID] {
					return nil, fmt.Errorf("job %d: %w job options: depends on job %d twice", i, pgqueuetype.ErrInvalid, d.JobID)
				}
				seenID[d.JobID] = true
				e = wfEdge{parent: d.JobID, policy: policy}
			case d.JobID == 0 && (d.Index >= 0) != (d.Name != ""):
				k := d.Index
				if d.Name != "" {
					var ok bool
					if k, ok = names[d.Name]; !ok {
						return nil, fmt.Errorf("job %d: depends on %q, which no job of the batch is named: %w", i, d.Name, pgqueuetype.ErrDependencyNotFound)
					}
				} else if k >= len(jobs) {
					return nil, fmt.Errorf("job %d: depends on position %d of a batch of %d: %w", i, k, len(jobs), pgqueuetype.ErrDependencyNotFound)
				}
				if k == i {
					return nil, fmt.Errorf("job %d: depends on itself: %w", i, pgqueuetype.ErrDependencyCycle)
				}
				if seenBatch[k] {
					return nil, fmt.Errorf("job %d: %w job options: depends on job %d of the batch twice", i, pgqueuetype.ErrInvalid, k)
				}
				seenBatch[k] = true
				e = wfEdge{parent: int64(k), inBatch: true, policy: policy}
			default:
				return nil, fmt.Errorf("job %d: %w job options: a dependency names exactly one of a job id, a position or a name", i, pgqueuetype.ErrInvalid)
			}
			out = append(out, e)
		}
		edges[i] = out
	}
	return edges, nil
}

func cmpOr(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// topoOrder returns the batch's positions with every job after the jobs of
// the batch it depends on, or ErrDependencyCycle naming a job of a cycle.
func topoOrder(n int, edges [][]wfEdge) ([]int, error) {
	indegree := make([]int, n)
	children := make([][]int, n)
	for i, es := range edges {
		for _, e := range es {
			if e.inBatch {
				indegree[i]++
				children[e.parent] = append(children[e.parent], i)
			}
		}
	}
	order := make([]int, 0, n)
	for i := range n {
		if indegree[i] == 0 {
			order = append(order, i)
		}
	}
	for k := 0; k < len(order); k++ {
		for _, c := range children[order[k]] {
			if indegree[c]--; indegree[c] == 0 {
				order = append(order, c)
			}
		}
	}
	if len(order) == n {
		return order, nil
	}
	// Every job left waits for another job left: walking up from one
	// reaches a cycle.
	at := slices.IndexFunc(indegree, func(d int) bool { return d > 0 })
	seen := make(map[int]bool)
	for !seen[at] {
		seen[at] = true
		for _, e := range edges[at] {
			if e.inBatch && indegree[e.parent] > 0 {
				at = int(e.parent)
				break
			}
		}
	}
	return nil, fmt.Errorf("job %d: its dependencies lead back to it: %w", at, pgqueuetype.ErrDependencyCycle)
}

// joinedWorkflow is the existing workflow the batch's jobs name, 0 for
// none; they must agree.
func joinedWorkflow(jobs []wfJob) (int64, error) {
	var wf int64
	for i, j := range jobs {
		if j.workflow == 0 {
			continue
		}
		if wf != 0 && j.workflow != wf {
			return 0, fmt.Errorf("job %d: %w job options: workflow %d, but another job of the batch joins workflow %d", i, pgqueuetype.ErrInvalid, j.workflow, wf)
		}
		wf = j.workflow
	}
	return wf, nil
}

// wfParent is a job in the table that jobs of the batch depend on.
type wfParent struct {
	id       int64
	state    pgqueuetype.JobState
	workflow int64
}

// lockParents marks and locks the jobs in the table the batch depends on
// (sql/workflow_parents.sql) and returns them by id. A job id no job has
// is ErrDependencyNotFound.
func (w *Writer) lockParents(ctx context.Context, tx pgx.Tx, edges [][]wfEdge) (map[int64]wfParent, error) {
	var ids []int64
	seen := map[int64]bool{}
	for _, es := range edges {
		for _, e := range es {
			if !e.inBatch && !seen[e.parent] {
				seen[e.parent] = true
				ids = append(ids, e.parent)
			}
		}
	}
	out := make(map[int64]wfParent, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	slices.Sort(ids) // rows locked in one order by every insert
	rows, err := tx.Query(ctx, w.Q.WorkflowParents, ids)
	if err != nil {
		return nil, dbError("enqueue workflow: lock parents", err)
	}
	for rows.Next() {
		var p wfParent
		var state string
		var wf *int64
		if err := rows.Scan(&p.id, &state, &wf); err != nil {
			rows.Close()
			return nil, dbError("enqueue workflow: lock parents", err)
		}
		p.state = pgqueuetype.JobState(state)
		if wf != nil {
			p.workflow = *wf
		}
		out[p.id] = p
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("enqueue workflow: lock parents", err)
	}
	var missing []int64
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		if len(missing) > 5 {
			missing = missing[:5]
		}
		return nil, fmt.Errorf("enqueue workflow: no job has id %v: %w", missing, pgqueuetype.ErrDependencyNotFound)
	}
	return out, nil
}

// WorkflowOne writes the one job p describes, which depends on jobs in
// the table or joins a workflow, through Workflow, in a transaction of
// db's (a savepoint when db is a transaction), and returns its row.
func (w *Writer) WorkflowOne(ctx context.Context, db DB, p *Params) (*pgqueuetype.JobRow, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, dbError("enqueue "+p.Kind, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	res, err := w.Workflow(ctx, tx, Source{N: 1, Params: func(_ int, out *Params) error { *out = *p; return nil }})
	if err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, w.Q.JobRow, res.IDs[0])
	if err != nil {
		return nil, dbError("enqueue "+p.Kind, err)
	}
	row, err := pgx.CollectExactlyOneRow(rows, jobsql.ScanJobRow)
	if err != nil {
		return nil, dbError("enqueue "+p.Kind, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, dbError("enqueue "+p.Kind, err)
	}
	return row, nil
}
