package pgqueue

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgqueue/pgqueue/internal/completer"
	"github.com/pgqueue/pgqueue/internal/enqueue"
	"github.com/pgqueue/pgqueue/internal/executor"
	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/internal/producer"
)

// CopyThreshold is the batch size from which EnqueueMany writes with COPY.
const CopyThreshold = enqueue.CopyThreshold

// NotifyChannel is the NOTIFY channel of a schema's inserts.
var NotifyChannel = jobsql.NotifyChannel

// SetBeforeRescueWrite installs a hook that runs between the rescuer's read
// of expired jobs and its conditional write.
func SetBeforeRescueWrite(c *Client, f func(ids []int64)) { c.testHooks.beforeRescueWrite = f }

// SetFinishQuery replaces the query that records job results.
func SetFinishQuery(c *Client, f func(ctx context.Context, query string, args ...any) (pgx.Rows, error)) {
	c.testHooks.finishQuery = f
}

// SetClaimAged makes every claim look d older when its jobs are
// dispatched, as if they had waited that long for a worker.
func SetClaimAged(c *Client, d time.Duration) { c.testHooks.claimAged = d }

// Pool returns the client's pool.
func Pool(c *Client) interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
} {
	return c.pool
}

// Claim runs one claim of up to limit jobs of queue under the queue's
// claim lock, as a producer does with a backlog or a sequence's jobs.
func Claim(ctx context.Context, c *Client, queue string, limit int) ([]*JobRow, error) {
	claims := &producer.Claimer{Pool: c.pool, Queries: c.q, Base: ctx, JobLease: c.config.JobLease, ClientID: c.config.ID,
		Schema: c.config.Schema, Log: c.log}
	jobs, _, err := claims.Claim(queue, limit, false, true)
	return jobs, err
}

// ClaimFlow runs one claim of a limited queue (sql/claim_flow.sql), as the
// producer of a queue with flow limits does, and says whether a backlog is
// left.
func ClaimFlow(ctx context.Context, c *Client, queue string, limit int) ([]*JobRow, bool, error) {
	claims := &producer.Claimer{Pool: c.pool, Queries: c.q, Base: ctx, JobLease: c.config.JobLease, ClientID: c.config.ID,
		Schema: c.config.Schema, Log: c.log}
	return claims.Claim(queue, limit, true, true)
}

// ClaimFlowSQL is sql/claim_flow.sql of the client's schema, for EXPLAIN.
func ClaimFlowSQL(c *Client) string { return c.q.ClaimFlow }

// Complete writes the completion of jobs in one fenced statement, as the
// completer does, and returns how many it updated: those it did not
// refuse.
func Complete(ctx context.Context, c *Client, jobs []*JobRow) (int, error) {
	outcomes := &jobsql.OutcomeReader{Pool: c.pool, Q: c.q, Base: ctx}
	k := c.newCompleter(ctx, c.pool.Query, outcomes, completer.Observer{}, len(jobs), 0)
	batch := make([]completer.Result, len(jobs))
	for i, j := range jobs {
		batch[i] = completer.Result{Row: j, Op: completer.OpComplete}
	}
	refused, err := k.Exec(batch)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, j := range jobs {
		if !refused[j.ID] {
			n++
		}
	}
	return n, nil
}

// Started reports whether c is started and not yet stopping: Stop clears
// it first thing.
func Started(c *Client) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running != nil
}

// Finish writes one result of op ("complete", "fail", "snooze", "cancel",
// "release", "discard") for job in one statement, as the completer does
// (sql/finish.sql, or sql/complete_one.sql for "complete"), and reports
// whether the row took it.
func Finish(ctx context.Context, c *Client, job *JobRow, op string, delay time.Duration) (bool, error) {
	outcomes := &jobsql.OutcomeReader{Pool: c.pool, Q: c.q, Base: ctx}
	k := c.newCompleter(ctx, c.pool.Query, outcomes, completer.Observer{}, 1, 0)
	var msg *string
	if op != completer.OpComplete {
		s := "stale " + op
		msg = &s
	}
	refused, err := k.Exec([]completer.Result{{Row: job, Op: op, Err: msg, Delay: delay}})
	return err == nil && !refused[job.ID], err
}

// Heartbeat runs one heartbeat for jobs, as a started client's heartbeater
// does, and returns the ids it found lost (their contexts cancelled with
// ErrJobLeaseLost) and those JobCancel asked to cancel.
func Heartbeat(ctx context.Context, c *Client, jobs []*JobRow) (lost, cancelled []int64, err error) {
	active := executor.NewActiveJobs()
	for _, j := range jobs {
		active.Add(j, func(error) {}, time.Now(), c.config.JobLease)
	}
	h := executor.NewHeartbeater(executor.HeartbeaterConfig{Pool: c.pool, Queries: c.q, Active: active, Log: c.log,
		Base: ctx, Interval: c.config.HeartbeatInterval, JobLease: c.config.JobLease})
	snapshot := active.Snapshot()
	if err := h.Heartbeat(snapshot); err != nil {
		return nil, nil, err
	}
	for _, j := range snapshot {
		if j.Lost() {
			lost = append(lost, j.Row().ID)
		}
		if j.CancelRequested() {
			cancelled = append(cancelled, j.Row().ID)
		}
	}
	return lost, cancelled, nil
}

// HeartbeatHarness holds jobs in a registry as a started client's
// heartbeater does, so a test can order a heartbeat against the end of a
// job's handler.
type HeartbeatHarness struct {
	active  *executor.ActiveJobs
	h       *executor.Heartbeater
	jobs    map[int64]*executor.ActiveJob
	Refused []int64 // jobs whose heartbeat write was refused
}

// NewHeartbeatHarness registers jobs as running under c's settings.
func NewHeartbeatHarness(ctx context.Context, c *Client, jobs []*JobRow) *HeartbeatHarness {
	x := &HeartbeatHarness{active: executor.NewActiveJobs(), jobs: map[int64]*executor.ActiveJob{}}
	for _, j := range jobs {
		x.jobs[j.ID] = x.active.Add(j, func(error) {}, time.Now(), c.config.JobLease)
	}
	x.h = executor.NewHeartbeater(executor.HeartbeaterConfig{Pool: c.pool, Queries: c.q, Active: x.active, Log: c.log,
		Base: ctx, Interval: c.config.HeartbeatInterval, JobLease: c.config.JobLease,
		WriteRefused: func(job *JobRow, _ FencedWrite) { x.Refused = append(x.Refused, job.ID) }})
	return x
}

// Read takes the jobs a heartbeat renews, as its first step does.
func (x *HeartbeatHarness) Read() []*executor.ActiveJob { return x.active.Snapshot() }

// Beat renews the jobs read, as the heartbeat's statement and verdict do.
func (x *HeartbeatHarness) Beat(read []*executor.ActiveJob) error { return x.h.Heartbeat(read) }

// HandlerReturned does what the executor does when id's handler returns,
// and reports whether the result is dropped (a heartbeat found the claim
// gone first).
func (x *HeartbeatHarness) HandlerReturned(id int64) (dropped bool) { return x.jobs[id].Finish() }

// Lost reports whether a heartbeat found id's claim gone.
func (x *HeartbeatHarness) Lost(id int64) bool { return x.jobs[id].Lost() }
