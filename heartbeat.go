package pgqueue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// activeJob is a job this client is running, with what it needs to keep or
// give up the claim.
type activeJob struct {
	row    *JobRow
	cancel context.CancelCauseFunc
	// expiry cancels the job with ErrLeaseLost when the lease runs out by
	// this process's monotonic clock with no heartbeat having renewed it.
	expiry *time.Timer
	// lost is set when a heartbeat found the claim gone: the job's result
	// is not written, it would be refused anyway.
	lost atomic.Bool
	// completedInTx is set by CompleteTx; the executor then checks whether
	// that transaction committed instead of completing the job again.
	completedInTx atomic.Bool
}

// activeJobs is the registry of a started client's running jobs.
type activeJobs struct {
	mu   sync.Mutex
	byID map[int64]*activeJob
}

// add registers a claimed job. sent is when the claim was sent: the
// database's lease started no earlier, so sent+lease is a safe local end.
func (a *activeJobs) add(row *JobRow, cancel context.CancelCauseFunc, sent time.Time, lease time.Duration) *activeJob {
	j := &activeJob{row: row, cancel: cancel}
	j.expiry = time.AfterFunc(time.Until(sent.Add(lease)), func() { cancel(ErrLeaseLost) })
	a.mu.Lock()
	a.byID[row.ID] = j
	a.mu.Unlock()
	return j
}

func (a *activeJobs) remove(j *activeJob) {
	j.expiry.Stop()
	a.mu.Lock()
	if a.byID[j.row.ID] == j {
		delete(a.byID, j.row.ID)
	}
	a.mu.Unlock()
}

// find returns the active job with this id and fence, if any.
func (a *activeJobs) find(id, fence int64) *activeJob {
	a.mu.Lock()
	defer a.mu.Unlock()
	if j := a.byID[id]; j != nil && j.row.Fence == fence {
		return j
	}
	return nil
}

func (a *activeJobs) snapshot() []*activeJob {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*activeJob, 0, len(a.byID))
	for _, j := range a.byID {
		out = append(out, j)
	}
	return out
}

func (c *Client) markCompletedInTx(job *JobRow) {
	c.mu.Lock()
	rs := c.running
	c.mu.Unlock()
	if rs == nil {
		return
	}
	if j := rs.active.find(job.ID, job.Fence); j != nil {
		j.completedInTx.Store(true)
	}
}

// runHeartbeats renews the leases of all running jobs of this client in one
// fenced statement every HeartbeatInterval. A job the statement did not
// renew was lost and is cancelled with ErrLeaseLost.
func (c *Client) runHeartbeats(rs *runState) {
	defer rs.heartbeats.Done()
	tick := time.NewTicker(c.config.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-rs.heartbeatsDone:
			return
		case <-tick.C:
		}
		jobs := rs.active.snapshot()
		if len(jobs) == 0 {
			continue
		}
		if err := c.heartbeat(rs, jobs); err != nil {
			// The expiry timers cancel the jobs if this goes on for a lease.
			c.log.Error("pgqueue: heartbeat failed", "jobs", len(jobs), "err", err)
		}
	}
}

func (c *Client) heartbeat(rs *runState, jobs []*activeJob) error {
	ids := make([]int64, len(jobs))
	fences := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i], fences[i] = j.row.ID, j.row.Fence
	}
	ctx, cancel := context.WithTimeout(rs.base, c.config.HeartbeatInterval)
	defer cancel()
	sent := time.Now()
	rows, err := c.pool.Query(ctx, c.q.heartbeat, oneShotPlan, ids, fences, c.config.Lease.Microseconds())
	if err != nil {
		return dbError("heartbeat", err)
	}
	held := make(map[int64]bool, len(jobs))
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return dbError("heartbeat", err)
		}
		held[id] = true
	}
	if err := rows.Err(); err != nil {
		return dbError("heartbeat", err)
	}
	until := time.Until(sent.Add(c.config.Lease))
	for _, j := range jobs {
		if held[j.row.ID] {
			j.expiry.Reset(until)
			continue
		}
		if j.completedInTx.Load() {
			continue // completed by the handler's own transaction
		}
		j.lost.Store(true)
		j.cancel(ErrLeaseLost)
		c.log.Warn("pgqueue: lease lost", "job", j.row.ID, "kind", j.row.Kind, "fence", j.row.Fence)
	}
	return nil
}
