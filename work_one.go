package pgqueue

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pgqueue/pgqueue/internal/executor"
	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/internal/workone"
)

func init() {
	workone.Run = func(ctx context.Context, client any, id int64) (string, error, error) {
		r, workErr, err := client.(*Client).workOne(ctx, id)
		return string(r), workErr, err
	}
}

// workOne claims job id at once, whatever its queue or run time, runs it
// on this goroutine through the same executor, middleware, error handler
// and completer as a started client, and waits for its result to be
// written. It is pgqueuetest.WorkJob: a client need not be started, and
// no heartbeat renews the lease, so the job should end within
// Config.JobLease.
func (c *Client) workOne(ctx context.Context, id int64) (Outcome, error, error) {
	cfg := c.config
	rows, err := c.pool.Query(ctx, c.q.ClaimID, id, cfg.JobLease.Microseconds(), cfg.ID)
	if err != nil {
		return "", nil, dbError(fmt.Sprintf("claim job %d", id), err)
	}
	jobs, err := jobsql.CollectJobRows(rows)
	if err != nil {
		return "", nil, dbError(fmt.Sprintf("claim job %d", id), err)
	}
	if len(jobs) == 0 {
		return "", nil, fmt.Errorf("%w: no scheduled or available job %d", ErrJobNotFound, id)
	}
	row := jobs[0]

	// The client's own observer still hears of the result; this one
	// keeps it for the caller.
	var (
		mu     sync.Mutex
		result Outcome
	)
	obs := resultObserver(cfg.Observer)
	recorded := obs.ResultRecorded
	obs.ResultRecorded = func(job *JobRow, r Outcome) {
		mu.Lock()
		result = r
		mu.Unlock()
		if recorded != nil {
			recorded(job, r)
		}
	}
	base := context.WithoutCancel(ctx)
	outcomes := &jobsql.OutcomeReader{Pool: c.pool, Q: c.q, Base: base}
	k := c.newCompleter(base, c.pool.Query, outcomes, obs, 1, 0)
	go k.Run()
	jobsCtx, cancelJobs := context.WithCancelCause(ctx)
	defer cancelJobs(nil)
	ec := c.executorConfig(executor.NewActiveJobs(), k, outcomes, obs, jobsCtx)
	var workErr error
	capture := WorkMiddlewareFunc(func(ctx context.Context, _ *JobRow, next func(context.Context) error) error {
		workErr = next(ctx)
		return workErr
	})
	ec.Middleware = append([]executor.WorkMiddleware{capture}, ec.Middleware...)
	exec := executor.New(ec)

	now := time.Now()
	var w *executor.Worker
	if cfg.Workers != nil {
		w = cfg.Workers.lookup(row.Kind)
	}
	cj := &executor.ClaimedJob{}
	cj.Set(row, w, now, now)
	exec.Execute(cj)
	k.Stop(ctx)

	mu.Lock()
	defer mu.Unlock()
	if result == "" {
		return "", workErr, fmt.Errorf("job %d: result not written (see the client's log)", id)
	}
	return result, workErr, nil
}
