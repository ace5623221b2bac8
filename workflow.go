package pgqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/enqueue"
)

// The limits of workflows. Past them the Enqueue calls return
// ErrWorkflowLimit and write nothing.
const (
	// MaxJobDependencies is the most jobs one job may depend on
	// (EnqueueOpts.DependsOn): enough for a fan-in of ten thousand jobs
	// into one.
	MaxJobDependencies = enqueue.MaxJobDependencies
	// MaxWorkflowJobs is the most jobs one workflow may hold, counting
	// those inserted into it later (EnqueueOpts.Workflow).
	MaxWorkflowJobs = enqueue.MaxWorkflowJobs
)

// ParentFailurePolicy says what a job does when a job it depends on ends
// discarded or cancelled.
type ParentFailurePolicy string

// The parent failure policies. The zero value is ParentFailureCancel.
const (
	// ParentFailureCancel cancels the dependent job too, and its own
	// dependents by their policies. Retrying the failed parent (JobRetry,
	// JobRetryMany, "pgqueue jobs retry", the dashboard) brings the jobs
	// its failure cancelled back to blocked: the workflow resumes. The
	// default.
	ParentFailureCancel ParentFailurePolicy = "cancel"
	// ParentFailureRun lets the dependent job run as if the parent had
	// completed.
	ParentFailureRun ParentFailurePolicy = "run"
	// ParentFailureWait leaves the dependent job blocked until the parent
	// is retried and completes.
	ParentFailureWait ParentFailurePolicy = "wait"
)

// Dependency is one job a job waits for (EnqueueOpts.DependsOn): a job in
// the table, or a job of the same EnqueueMany batch by position or name.
// Make one with DependsOnJob, DependsOnIndex or DependsOnName; the zero
// value is refused with ErrInvalid.
type Dependency struct {
	jobID     int64
	pos       int // position + 1: 0 for none
	name      string
	onFailure ParentFailurePolicy
}

// DependsOnJob is a dependency on the job with id id, already in the
// table (inserted by an earlier, committed call, or earlier in the same
// transaction). A job that completed already does not hold its new
// dependent; one that was discarded or cancelled already applies the
// dependency's policy at once.
func DependsOnJob(id int64) Dependency { return Dependency{jobID: id} }

// DependsOnIndex is a dependency on the job at position i of the same
// EnqueueMany (or EnqueueManyTx) batch.
func DependsOnIndex(i int) Dependency {
	if i < 0 {
		return Dependency{pos: -1} // refused as out of the batch
	}
	return Dependency{pos: i + 1}
}

// DependsOnName is a dependency on the job of the same EnqueueMany batch
// whose EnqueueOpts.Name is name.
func DependsOnName(name string) Dependency { return Dependency{name: name} }

// OnFailure returns d with its own parent failure policy, which overrides
// the job's EnqueueOpts.OnParentFailure.
func (d Dependency) OnFailure(p ParentFailurePolicy) Dependency {
	d.onFailure = p
	return d
}

// dep is d as the writer takes it.
func (d Dependency) dep() enqueue.Dep {
	index := -1
	switch {
	case d.pos > 0:
		index = d.pos - 1
	case d.pos < 0:
		index = math.MaxInt
	}
	return enqueue.Dep{JobID: d.jobID, Index: index, Name: d.name, OnFailure: string(d.onFailure)}
}

// deps converts ds for the writer; nil for none.
func deps(ds []Dependency) []enqueue.Dep {
	if len(ds) == 0 {
		return nil
	}
	out := make([]enqueue.Dep, len(ds))
	for i, d := range ds {
		out[i] = d.dep()
	}
	return out
}

// Workflow is a workflow's status, as WorkflowGet read it in one
// snapshot.
type Workflow struct {
	// ID is the workflow's id.
	ID int64
	// Counts are its jobs by state; states without jobs are absent.
	Counts map[JobState]int
	// Jobs are its jobs in id order, every column JobRow holds.
	Jobs []*JobRow
	// Edges are the dependencies of its jobs, by child then parent.
	Edges []WorkflowEdge
}

// Done reports whether every job of the workflow is final.
func (w *Workflow) Done() bool {
	for state, n := range w.Counts {
		if n > 0 && !state.Final() {
			return false
		}
	}
	return true
}

// WorkflowEdge is one dependency of a workflow: Child waits for Parent.
type WorkflowEdge struct {
	Parent, Child int64
	// OnFailure is the dependency's policy.
	OnFailure ParentFailurePolicy
	// Resolved is true once the edge no longer holds Child: Parent
	// completed (or failed under ParentFailureRun, or was deleted).
	Resolved bool
}

// WorkflowGet returns the status of workflow id: its jobs, counts by
// state and edges, read in one transaction. It returns
// ErrWorkflowNotFound when no job belongs to id (it never existed, or all
// its jobs were deleted, by JobDelete or retention).
func (c *Client) WorkflowGet(ctx context.Context, id int64) (*Workflow, error) {
	op := fmt.Sprintf("workflow get %d", id)
	if err := ctxError(ctx, op); err != nil {
		return nil, err
	}
	var w *Workflow
	err := pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, c.q.WorkflowJobs, id)
		if err != nil {
			return err
		}
		jobs, err := collectFullJobRows(rows)
		if err != nil {
			return err
		}
		if len(jobs) == 0 {
			return nil
		}
		w = &Workflow{ID: id, Counts: map[JobState]int{}, Jobs: jobs}
		for _, j := range jobs {
			w.Counts[j.State]++
		}
		rows, err = tx.Query(ctx, c.q.WorkflowEdges, id)
		if err != nil {
			return err
		}
		w.Edges, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (WorkflowEdge, error) {
			var e WorkflowEdge
			var policy string
			err := row.Scan(&e.Parent, &e.Child, &policy, &e.Resolved)
			e.OnFailure = ParentFailurePolicy(policy)
			return e, err
		})
		return err
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	if w == nil {
		return nil, fmt.Errorf("pgqueue: %s: %w", op, ErrWorkflowNotFound)
	}
	return w, nil
}

// ParentOutput is one job a running job depends on, with the output it
// recorded (RecordOutput).
type ParentOutput struct {
	// JobID is the parent's id.
	JobID int64
	// State is the parent's state: completed, unless the dependency's
	// policy let the job run after the parent failed.
	State JobState
	// Output is the JSON the parent recorded; nil when it recorded none.
	Output json.RawMessage
}

// ParentOutputs returns the jobs that the job whose handler's context ctx
// is depends on, in id order, each with the output it recorded. A parent
// deleted or pruned meanwhile is absent. It returns ErrNoJobContext when
// ctx is not a job's context.
func ParentOutputs(ctx context.Context) ([]ParentOutput, error) {
	j, c := runningJob(ctx)
	if j == nil {
		return nil, fmt.Errorf("pgqueue: parent outputs: %w", ErrNoJobContext)
	}
	op := fmt.Sprintf("parent outputs of job %d", j.Row().ID)
	if err := ctxError(ctx, op); err != nil {
		return nil, err
	}
	rows, err := c.pool.Query(ctx, c.q.JobParentOutputs, j.Row().ID)
	if err != nil {
		return nil, dbError(op, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ParentOutput, error) {
		var p ParentOutput
		var state string
		err := row.Scan(&p.JobID, &state, &p.Output)
		p.State = JobState(state)
		return p, err
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	return out, nil
}

// EnqueueBatch inserts jobs, all or none, and a callback job that runs
// once, when every job of jobs has finished, completed or not: it depends
// on each of them with ParentFailureRun, whatever its Opts say. The
// callback's handler reads how they ended with ParentCounts (or each
// one's output with ParentOutputs). The callback is the last of the
// result's IDs. Jobs may depend on each other as in EnqueueMany (by
// position within jobs, or by name); at most MaxJobDependencies jobs.
func (c *Client) EnqueueBatch(ctx context.Context, jobs []EnqueueManyParams, callback EnqueueManyParams) (*EnqueueManyResult, error) {
	params, err := batchParams(jobs, callback)
	if err != nil {
		return nil, err
	}
	return c.EnqueueMany(ctx, params)
}

// EnqueueBatchTx is EnqueueBatch inside tx: the jobs exist only if tx
// commits.
func (c *Client) EnqueueBatchTx(ctx context.Context, tx pgx.Tx, jobs []EnqueueManyParams, callback EnqueueManyParams) (*EnqueueManyResult, error) {
	params, err := batchParams(jobs, callback)
	if err != nil {
		return nil, err
	}
	return c.EnqueueManyTx(ctx, tx, params)
}

// batchParams returns jobs followed by callback, made to depend on each
// of them under ParentFailureRun.
func batchParams(jobs []EnqueueManyParams, callback EnqueueManyParams) ([]EnqueueManyParams, error) {
	if len(jobs) == 0 {
		return nil, fmt.Errorf("pgqueue: enqueue batch: %w: no jobs", ErrInvalid)
	}
	if len(jobs) > MaxJobDependencies {
		return nil, fmt.Errorf("pgqueue: enqueue batch: %d jobs, at most %d: %w", len(jobs), MaxJobDependencies, ErrWorkflowLimit)
	}
	var opts EnqueueOpts
	if callback.Opts != nil {
		opts = *callback.Opts
	}
	opts.DependsOn = make([]Dependency, len(jobs))
	for i := range jobs {
		opts.DependsOn[i] = DependsOnIndex(i).OnFailure(ParentFailureRun)
	}
	return append(slices.Clip(jobs), EnqueueManyParams{Args: callback.Args, Opts: &opts}), nil
}

// ParentCounts returns, for the job whose handler's context ctx is, how
// many of the jobs it depends on are in each state: for a batch's
// callback (EnqueueBatch), how the batch's jobs ended. It returns
// ErrNoJobContext when ctx is not a job's context.
func ParentCounts(ctx context.Context) (map[JobState]int, error) {
	j, c := runningJob(ctx)
	if j == nil {
		return nil, fmt.Errorf("pgqueue: parent counts: %w", ErrNoJobContext)
	}
	op := fmt.Sprintf("parent counts of job %d", j.Row().ID)
	if err := ctxError(ctx, op); err != nil {
		return nil, err
	}
	rows, err := c.pool.Query(ctx, c.q.JobParentCounts, j.Row().ID)
	if err != nil {
		return nil, dbError(op, err)
	}
	out := map[JobState]int{}
	var state string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&state, &n}, func() error {
		out[JobState(state)] = n
		return nil
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	return out, nil
}
