package executor

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// ActiveJob is a job this client is running, with what it needs to keep or
// give up the claim.
type ActiveJob struct {
	row *pgqueuetype.JobRow
	// cancel cancels the job's context when it is not jobCtx (Add, and
	// the executor without jobContext); nil otherwise.
	cancel context.CancelCauseFunc
	// leaseEnd is when the claim's lease ends by this process's monotonic
	// clock (see ActiveJobs.at); heartbeats move it. The expiry sweep
	// cancels the job with ErrJobLeaseLost once it passes: one sweep for all
	// jobs costs less than a timer per job.
	leaseEnd atomic.Int64
	// expired is set by the sweep that cancelled the job.
	expired atomic.Bool
	// end is who ended the attempt first: a heartbeat that found the
	// claim gone (endLost: the result is not written, it would be refused)
	// or the executor once the handler returned (endFinished: the fenced
	// result write decides, and says so if the claim was in fact gone). One
	// compare-and-swap decides, so a lost lease is reported exactly once,
	// and a heartbeat that reads the row after the job's result landed is
	// never taken for a loss.
	end atomic.Int32
	// completedInTx is set by CompleteTx; the executor then checks whether
	// that transaction committed instead of completing the job again.
	completedInTx atomic.Bool
	// ctx carries the job (see withJob); jobCtx is the job's context
	// over it, handler the handler's, with its timeout (see jobContext).
	ctx             jobValueCtx
	jobCtx, handler jobContext
	// cancelRequested is set when JobCancel's request reached this client
	// (control notification or heartbeat): the handler's context is
	// cancelled with ErrJobCancelled and an error it returns ends the job
	// cancelled.
	cancelRequested atomic.Bool
}

// requestCancel cancels the handler's context with ErrJobCancelled, once.
func (j *ActiveJob) requestCancel() {
	if j.cancelRequested.CompareAndSwap(false, true) {
		j.cancelWith(pgqueuetype.ErrJobCancelled)
	}
}

// cancelWith cancels the job's context with cause, and with it the
// handler's. Every cancellation of a job goes through it.
func (j *ActiveJob) cancelWith(cause error) {
	if j.cancel != nil {
		j.cancel(cause)
	} else {
		j.jobCtx.end(context.Canceled, cause, false) // a nil cause is Err
	}
	j.handler.end(context.Canceled, nil, true)
}

// Row is the job as claimed.
func (j *ActiveJob) Row() *pgqueuetype.JobRow { return j.row }

// MarkCompletedInTx notes that the handler completed the job in its own
// transaction (CompleteTx): the executor then checks whether that
// transaction committed instead of completing the job again.
func (j *ActiveJob) MarkCompletedInTx() { j.completedInTx.Store(true) }

const (
	endRunning int32 = iota
	endLost
	endFinished
)

// Lost reports whether a heartbeat found the claim gone.
func (j *ActiveJob) Lost() bool { return j.end.Load() == endLost }

// markLost records that a heartbeat found the claim gone, unless the
// handler returned first; it reports whether it did.
func (j *ActiveJob) markLost() bool { return j.end.CompareAndSwap(endRunning, endLost) }

// Finish records that the handler returned and reports whether a
// heartbeat had found the claim gone before: the result is then dropped.
// Otherwise the result is written and its fence decides.
func (j *ActiveJob) Finish() (lost bool) {
	return !j.end.CompareAndSwap(endRunning, endFinished) && j.end.Load() == endLost
}

// CancelRequested reports whether JobCancel's request reached the job.
func (j *ActiveJob) CancelRequested() bool { return j.cancelRequested.Load() }

// ActiveJobs is the registry of a started client's running jobs.
type ActiveJobs struct {
	// epoch is the origin of leaseEnd: times are kept as monotonic
	// nanoseconds since it.
	epoch time.Time
	mu    sync.Mutex
	byID  map[int64]*ActiveJob
	// stopped, once set, is the cause every job added later is cancelled
	// with at once (see CancelAll).
	stopped error
	// early holds cancel requests for claims not registered when the
	// request came, with when it came: a job claimed ahead waits for an
	// executor before Add, and is cancelled as it is added. Most are for
	// other clients' jobs: at most earlyCancelMax are kept, room made by
	// dropping those older than earlyCancelTTL. A fence names one claim,
	// so a kept request never matches another.
	early map[claimKey]time.Time
	// earlyExpiry is when the oldest kept request passes earlyCancelTTL, as
	// the last sweep found: a full map is not swept again before, so a
	// burst of requests past the bound costs one sweep, not one each.
	earlyExpiry time.Time
	// now is time.Now but in tests.
	now func() time.Time
}

// claimKey names one claim of a job.
type claimKey struct{ id, fence int64 }

const (
	// earlyCancelTTL is how long a cancel request for a claim this client
	// has not registered is kept: longer than a claimed job waits for an
	// executor before it is handed back (a third of the lease).
	earlyCancelTTL = 10 * time.Minute
	// earlyCancelMax bounds the requests kept; past it, new ones are not
	// kept (the heartbeat still brings them).
	earlyCancelMax = 4096
)

// NewActiveJobs returns an empty registry.
func NewActiveJobs() *ActiveJobs {
	return &ActiveJobs{epoch: time.Now(), byID: map[int64]*ActiveJob{}, now: time.Now}
}

// at converts t to the registry's clock.
func (a *ActiveJobs) at(t time.Time) int64 { return int64(t.Sub(a.epoch)) }

// Add registers a claimed job. sent is when the claim was sent: the
// database's lease started no earlier, so sent+lease is a safe local end.
func (a *ActiveJobs) Add(row *pgqueuetype.JobRow, cancel context.CancelCauseFunc, sent time.Time, lease time.Duration) *ActiveJob {
	return a.addIn(&ActiveJob{}, row, cancel, sent, lease)
}

// addIn is Add with the caller's storage for the ActiveJob, which must be
// zero: the executor's, allocated with its claimed job.
func (a *ActiveJobs) addIn(j *ActiveJob, row *pgqueuetype.JobRow, cancel context.CancelCauseFunc, sent time.Time, lease time.Duration) *ActiveJob {
	j.row, j.cancel = row, cancel
	j.leaseEnd.Store(a.at(sent.Add(lease)))
	a.mu.Lock()
	a.byID[row.ID] = j
	stopped := a.stopped
	cancelled := false
	if len(a.early) > 0 {
		k := claimKey{row.ID, row.Fence}
		_, cancelled = a.early[k]
		delete(a.early, k)
	}
	a.mu.Unlock()
	if stopped != nil {
		j.cancelWith(stopped)
	}
	if cancelled {
		j.requestCancel()
	}
	return j
}

// requestCancel cancels the handler of the claim id, fence if it runs
// here, and otherwise keeps the request for that claim's Add.
func (a *ActiveJobs) requestCancel(id, fence int64) {
	a.mu.Lock()
	j := a.findLocked(id, fence)
	if j == nil {
		a.keepEarly(claimKey{id, fence})
	}
	a.mu.Unlock()
	if j != nil {
		j.requestCancel()
	}
}

// keepEarly keeps a cancel request for a claim not registered; a.mu held.
func (a *ActiveJobs) keepEarly(k claimKey) {
	now := a.now()
	if a.early == nil {
		a.early = map[claimKey]time.Time{}
	}
	if len(a.early) >= earlyCancelMax {
		if !now.After(a.earlyExpiry) {
			return
		}
		oldest := now
		for key, at := range a.early {
			if now.Sub(at) > earlyCancelTTL {
				delete(a.early, key)
			} else if at.Before(oldest) {
				oldest = at
			}
		}
		a.earlyExpiry = oldest.Add(earlyCancelTTL)
		if len(a.early) >= earlyCancelMax {
			return
		}
	}
	a.early[k] = now
}

// CancelAll cancels every running job, and every job added from now on,
// with cause. Job contexts are not children of the client's context: a
// thousand jobs registering with one parent contend on its lock.
func (a *ActiveJobs) CancelAll(cause error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopped = cause
	for _, j := range a.byID {
		j.cancelWith(cause)
	}
}

// expire cancels, with ErrJobLeaseLost, the jobs whose lease ends before
// now+margin by the local clock. buf is reused between calls.
func (a *ActiveJobs) expire(now time.Time, margin time.Duration, buf []*ActiveJob) []*ActiveJob {
	limit := a.at(now.Add(margin))
	buf = buf[:0]
	a.mu.Lock()
	for _, j := range a.byID {
		if j.leaseEnd.Load() <= limit && !j.expired.Load() {
			buf = append(buf, j)
		}
	}
	a.mu.Unlock()
	for _, j := range buf {
		if j.expired.CompareAndSwap(false, true) {
			j.cancelWith(pgqueuetype.ErrJobLeaseLost)
		}
	}
	return buf
}

func (a *ActiveJobs) remove(j *ActiveJob) {
	a.mu.Lock()
	if a.byID[j.row.ID] == j {
		delete(a.byID, j.row.ID)
	}
	a.mu.Unlock()
}

// find returns the active job with this id and fence, if any.
func (a *ActiveJobs) find(id, fence int64) *ActiveJob {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.findLocked(id, fence)
}

// findLocked is find with a.mu held.
func (a *ActiveJobs) findLocked(id, fence int64) *ActiveJob {
	if j := a.byID[id]; j != nil && j.row.Fence == fence {
		return j
	}
	return nil
}

// Snapshot returns the jobs running now.
func (a *ActiveJobs) Snapshot() []*ActiveJob {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*ActiveJob, 0, len(a.byID))
	for _, j := range a.byID {
		out = append(out, j)
	}
	return out
}

// MarkCompletedInTx notes that the handler of the job with this id and
// fence completed it in its own transaction (CompleteTx).
func (a *ActiveJobs) MarkCompletedInTx(id, fence int64) {
	if j := a.find(id, fence); j != nil {
		j.MarkCompletedInTx()
	}
}
