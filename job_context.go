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

// withJobContext returns ctx carrying the client and claim of a running job.
func withJobContext(ctx context.Context, c *Client, j *activeJob) context.Context {
	return context.WithValue(ctx, jobContextKey{}, &jobContext{client: c, job: j})
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
