package pgqueue

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgqueue/pgqueue/internal/jobsql"
)

// CopyThreshold is the batch size from which EnqueueMany writes with COPY.
const CopyThreshold = copyThreshold

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

// Claim runs one claim of up to limit jobs of queue, as a producer does.
func Claim(ctx context.Context, c *Client, queue string, limit int) ([]*JobRow, error) {
	claims := &claimer{pool: c.pool, q: c.q, base: ctx, jobLease: c.config.JobLease, clientID: c.config.ID}
	return claims.claim(queue, limit, false)
}

// Complete writes the completion of jobs in one fenced statement, as the
// completer does, and returns how many it updated.
func Complete(ctx context.Context, c *Client, jobs []*JobRow) (int, error) {
	outcomes := &jobsql.OutcomeReader{Pool: c.pool, Q: c.q, Base: ctx}
	k := newCompleter(ctx, c.pool.Query, c.q, outcomes, c.log, len(jobs), 0, c.config.JobLease)
	batch := make([]result, len(jobs))
	for i, j := range jobs {
		batch[i] = result{row: j, op: opComplete}
	}
	updated, err := k.exec(batch)
	return len(updated), err
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
// (sql/finish.sql, or sql/complete_many.sql for "complete"), and reports
// whether the row took it.
func Finish(ctx context.Context, c *Client, job *JobRow, op string, delay time.Duration) (bool, error) {
	outcomes := &jobsql.OutcomeReader{Pool: c.pool, Q: c.q, Base: ctx}
	k := newCompleter(ctx, c.pool.Query, c.q, outcomes, c.log, 1, 0, c.config.JobLease)
	var msg *string
	if op != opComplete {
		s := "stale " + op
		msg = &s
	}
	updated, err := k.exec([]result{{row: job, op: op, err: msg, delay: delay}})
	return updated[job.ID], err
}

// Heartbeat runs one heartbeat for jobs, as a started client's heartbeater
// does, and returns the ids it found lost (their contexts cancelled with
// ErrJobLeaseLost) and those JobCancel asked to cancel.
func Heartbeat(ctx context.Context, c *Client, jobs []*JobRow) (lost, cancelled []int64, err error) {
	active := newActiveJobs()
	for _, j := range jobs {
		active.add(j, func(error) {}, time.Now(), c.config.JobLease)
	}
	h := newHeartbeater(ctx, c.pool, c.q, active, c.log, c.config.HeartbeatInterval, c.config.JobLease)
	snapshot := active.snapshot()
	if err := h.heartbeat(snapshot); err != nil {
		return nil, nil, err
	}
	for _, j := range snapshot {
		if j.lost.Load() {
			lost = append(lost, j.row.ID)
		}
		if j.cancelRequested.Load() {
			cancelled = append(cancelled, j.row.ID)
		}
	}
	return lost, cancelled, nil
}
