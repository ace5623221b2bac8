package pgqueue

import "context"

// jobContext is what a running job's context carries: the client that runs
// it, for ClientFromContext, and the job's claim, for the fenced writes a
// handler makes about its own job (RecordOutput, RecordProgress).
type jobContext struct {
	client *Client
	job    *activeJob
}

type jobContextKey struct{}

// jobValueCtx is ctx carrying a running job's jobContext, as
// context.WithValue would, but kept inside the job's activeJob: two
// allocations less per job.
type jobValueCtx struct {
	context.Context
	jc jobContext
}

// Value returns the job's jobContext for jobContextKey, else ctx's value.
func (c *jobValueCtx) Value(key any) any {
	if _, ok := key.(jobContextKey); ok {
		return &c.jc
	}
	return c.Context.Value(key)
}

// withJobContext returns ctx carrying the client and claim of a running job.
func withJobContext(ctx context.Context, c *Client, j *activeJob) context.Context {
	j.ctx = jobValueCtx{Context: ctx, jc: jobContext{client: c, job: j}}
	return &j.ctx
}

// jobContextFrom returns what withJobContext put in ctx, or nil.
func jobContextFrom(ctx context.Context) *jobContext {
	jc, _ := ctx.Value(jobContextKey{}).(*jobContext)
	return jc
}

// ClientFromContext returns the client running the job whose context ctx
// is (or derives from), so a handler can enqueue follow-up jobs or call
// CompleteTx without a global. It returns nil outside a job's context.
func ClientFromContext(ctx context.Context) *Client {
	if jc := jobContextFrom(ctx); jc != nil {
		return jc.client
	}
	return nil
}
