package executor

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/dberr"
	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// expirySweep is how often running jobs are checked for a lease that ran
// out by the local clock: Lease/20, so at least 50 ms (Lease is at least
// 1 s), and at most 500 ms. A job is cancelled up to one sweep early,
// never late.
func expirySweep(lease time.Duration) time.Duration {
	return min(lease/20, 500*time.Millisecond)
}

// Heartbeater renews the leases of all running jobs of a client in one
// fenced statement every interval (sql/heartbeat.sql). A job the
// statement did not renew was lost and is cancelled with ErrJobLeaseLost;
// one JobCancel asked to cancel is cancelled with ErrJobCancelled, in case
// the control notification never came.
// Between heartbeats it cancels the jobs whose lease ran out by the local
// clock.
type Heartbeater struct {
	pool   *pgxpool.Pool
	q      *jobsql.Queries
	active *ActiveJobs
	log    *slog.Logger
	// writeRefused is Observer.WriteRefused; may be nil.
	writeRefused func(job *pgqueuetype.JobRow, write pgqueuetype.FencedWrite)
	// base is the parent of its writes, detached from Stop: heartbeats go
	// on while running jobs finish during Stop.
	base     context.Context
	interval time.Duration
	jobLease time.Duration
	quit     chan struct{} // closed by Stop
	// beatNow (capacity 1) asks for a heartbeat at once: after the LISTEN
	// connection (re)connects, since cancel requests notified while it
	// was away were lost and the heartbeat reads them.
	beatNow chan struct{}
	done    chan struct{} // closed when Run returns
}

// HeartbeaterConfig is what a Heartbeater is built from.
type HeartbeaterConfig struct {
	Pool    *pgxpool.Pool
	Queries *jobsql.Queries
	// Active is the registry whose jobs it renews and sweeps.
	Active *ActiveJobs
	Log    *slog.Logger
	// WriteRefused is told of each job a heartbeat found lost; may be nil.
	WriteRefused func(job *pgqueuetype.JobRow, write pgqueuetype.FencedWrite)
	// Base is the parent of its writes, detached from Stop.
	Base context.Context
	// Interval is Config.HeartbeatInterval; JobLease the lease each
	// heartbeat grants.
	Interval, JobLease time.Duration
}

// NewHeartbeater returns a heartbeater; start it with Run.
func NewHeartbeater(cfg HeartbeaterConfig) *Heartbeater {
	return &Heartbeater{pool: cfg.Pool, q: cfg.Queries, active: cfg.Active, log: cfg.Log, writeRefused: cfg.WriteRefused,
		base: cfg.Base, interval: cfg.Interval, jobLease: cfg.JobLease,
		quit: make(chan struct{}), done: make(chan struct{}), beatNow: make(chan struct{}, 1)}
}

// Nudge asks for a heartbeat now; one already pending is enough.
func (h *Heartbeater) Nudge() {
	select {
	case h.beatNow <- struct{}{}:
	default:
	}
}

// Stop ends Run and waits for it.
func (h *Heartbeater) Stop() {
	close(h.quit)
	<-h.done
}

// Run renews and sweeps until Stop.
func (h *Heartbeater) Run() {
	defer close(h.done)
	tick := time.NewTicker(h.interval)
	defer tick.Stop()
	sweep := expirySweep(h.jobLease)
	sweepTick := time.NewTicker(sweep)
	defer sweepTick.Stop()
	var buf []*ActiveJob
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
		jobs := h.active.Snapshot()
		if len(jobs) == 0 {
			continue
		}
		if err := h.Heartbeat(jobs); err != nil {
			// The expiry sweep cancels the jobs if this goes on for a lease.
			h.log.Error("pgqueue: heartbeat failed", "jobs", len(jobs), "err", err)
		}
	}
}

// Heartbeat renews the leases of jobs in one statement, once: the jobs it
// finds lost are cancelled with ErrJobLeaseLost, those JobCancel asked to
// cancel with ErrJobCancelled.
func (h *Heartbeater) Heartbeat(jobs []*ActiveJob) error {
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
		return dberr.Wrap("pgqueue", "heartbeat", err)
	}
	held := make(map[int64]bool, len(jobs))
	var cancels []int64 // jobs JobCancel asked to cancel: rare
	for rows.Next() {
		var id int64
		var cancelRequested bool
		if err := rows.Scan(&id, &cancelRequested); err != nil {
			rows.Close()
			return dberr.Wrap("pgqueue", "heartbeat", err)
		}
		held[id] = true
		if cancelRequested {
			cancels = append(cancels, id)
		}
	}
	if err := rows.Err(); err != nil {
		return dberr.Wrap("pgqueue", "heartbeat", err)
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
		if !j.markLost() {
			// The handler returned first, maybe before this statement read
			// the row: the result's fenced write decides.
			continue
		}
		j.cancelWith(pgqueuetype.ErrJobLeaseLost)
		h.log.Warn("pgqueue: lease lost", "job", j.row.ID, "kind", j.row.Kind, "fence", j.row.Fence,
			"queue", j.row.Queue, "attempt", j.row.Attempt)
		if f := h.writeRefused; f != nil {
			f(j.row, pgqueuetype.WriteHeartbeat)
		}
	}
	return nil
}
