package pgqueue

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/jobsql"
)

// expirySweep is how often running jobs are checked for a lease that ran
// out by the local clock: Lease/20, so at least 50 ms (Lease is at least
// 1 s), and at most 500 ms. A job is cancelled up to one sweep early,
// never late.
func expirySweep(lease time.Duration) time.Duration {
	return min(lease/20, 500*time.Millisecond)
}

// heartbeater renews the leases of all running jobs of a client in one
// fenced statement every interval (sql/heartbeat.sql). A job the
// statement did not renew was lost and is cancelled with ErrJobLeaseLost;
// one JobCancel asked to cancel is cancelled with ErrJobCancelled, in case
// the control notification never came.
// Between heartbeats it cancels the jobs whose lease ran out by the local
// clock.
type heartbeater struct {
	pool   *pgxpool.Pool
	q      *jobsql.Queries
	active *activeJobs
	log    *slog.Logger
	obs    *Observer
	// base is the parent of its writes, detached from Stop: heartbeats go
	// on while running jobs finish during Stop.
	base     context.Context
	interval time.Duration
	jobLease time.Duration
	quit     chan struct{} // closed by stop
	// beatNow (capacity 1) asks for a heartbeat at once: after the LISTEN
	// connection (re)connects, since cancel requests notified while it
	// was away were lost and the heartbeat reads them.
	beatNow chan struct{}
	done    chan struct{} // closed when run returns
}

func newHeartbeater(base context.Context, pool *pgxpool.Pool, q *jobsql.Queries, active *activeJobs, log *slog.Logger, interval, jobLease time.Duration) *heartbeater {
	return &heartbeater{pool: pool, q: q, active: active, log: log, obs: &Observer{}, base: base, interval: interval, jobLease: jobLease,
		quit: make(chan struct{}), done: make(chan struct{}), beatNow: make(chan struct{}, 1)}
}

// nudge asks for a heartbeat now; one already pending is enough.
func (h *heartbeater) nudge() {
	select {
	case h.beatNow <- struct{}{}:
	default:
	}
}

// stop ends run and waits for it.
func (h *heartbeater) stop() {
	close(h.quit)
	<-h.done
}

// run renews and sweeps until stop.
func (h *heartbeater) run() {
	defer close(h.done)
	tick := time.NewTicker(h.interval)
	defer tick.Stop()
	sweep := expirySweep(h.jobLease)
	sweepTick := time.NewTicker(sweep)
	defer sweepTick.Stop()
	var buf []*activeJob
	for {
		select {
		case <-h.quit:
			return
		case now := <-sweepTick.C:
			buf = h.active.expire(now, sweep, buf)
			continue
		case <-tick.C:
		case <-h.beatNow:
		}
		jobs := h.active.snapshot()
		if len(jobs) == 0 {
			continue
		}
		if err := h.heartbeat(jobs); err != nil {
			// The expiry sweep cancels the jobs if this goes on for a lease.
			h.log.Error("pgqueue: heartbeat failed", "jobs", len(jobs), "err", err)
		}
	}
}

func (h *heartbeater) heartbeat(jobs []*activeJob) error {
	ids := make([]int64, len(jobs))
	fences := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i], fences[i] = j.row.ID, j.row.Fence
	}
	ctx, cancel := context.WithTimeout(h.base, h.interval)
	defer cancel()
	sent := time.Now()
	rows, err := h.pool.Query(ctx, h.q.Heartbeat, jobsql.OneShotPlan, ids, fences, h.jobLease.Microseconds())
	if err != nil {
		return dbError("heartbeat", err)
	}
	held := make(map[int64]bool, len(jobs))
	var cancels []int64 // jobs JobCancel asked to cancel: rare
	for rows.Next() {
		var id int64
		var cancelRequested bool
		if err := rows.Scan(&id, &cancelRequested); err != nil {
			rows.Close()
			return dbError("heartbeat", err)
		}
		held[id] = true
		if cancelRequested {
			cancels = append(cancels, id)
		}
	}
	if err := rows.Err(); err != nil {
		return dbError("heartbeat", err)
	}
	until := h.active.at(sent.Add(h.jobLease))
	for _, j := range jobs {
		if held[j.row.ID] {
			j.leaseEnd.Store(until)
			if slices.Contains(cancels, j.row.ID) {
				j.requestCancel()
			}
			continue
		}
		if j.completedInTx.Load() {
			continue // completed by the handler's own transaction
		}
		j.lost.Store(true)
		j.cancel(ErrJobLeaseLost)
		h.log.Warn("pgqueue: lease lost", "job", j.row.ID, "kind", j.row.Kind, "fence", j.row.Fence,
			"queue", j.row.Queue, "attempt", j.row.Attempt)
		if f := h.obs.WriteRefused; f != nil {
			f(j.row, WriteHeartbeat)
		}
	}
	return nil
}
