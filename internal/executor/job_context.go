package executor

import "context"

// jobKey is the context key of a running job's *ActiveJob.
type jobKey struct{}

// jobValueCtx is ctx carrying a running job, as context.WithValue would,
// but kept inside the job's ActiveJob: two allocations less per job.
type jobValueCtx struct {
	context.Context
	job *ActiveJob
	// exec is the executor running the job, for its Owner: a pointer, not
	// the Owner itself, keeps every claimed job 8 bytes smaller.
	exec *Executor
}

// Value returns the job for jobKey, else ctx's value.
func (c *jobValueCtx) Value(key any) any {
	if _, ok := key.(jobKey); ok {
		return c.job
	}
	return c.Context.Value(key)
}

// withJob returns ctx carrying j, run by e, stored in j.
func withJob(ctx context.Context, j *ActiveJob, e *Executor) context.Context {
	j.ctx = jobValueCtx{Context: ctx, job: j, exec: e}
	return &j.ctx
}

// JobFromContext returns the running job whose context ctx is (or derives
// from), or nil: for the handler's fenced writes about its own job
// (RecordOutput, CompleteTx) and for ClientFromContext.
func JobFromContext(ctx context.Context) *ActiveJob {
	j, _ := ctx.Value(jobKey{}).(*ActiveJob)
	return j
}

// Owner is Config.Owner of the executor running the job (the client): nil
// for a job not run by an executor.
func (j *ActiveJob) Owner() any {
	if e := j.ctx.exec; e != nil {
		return e.owner
	}
	return nil
}
