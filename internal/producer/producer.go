package producer

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgqueue/pgqueue/internal/executor"
	"github.com/pgqueue/pgqueue/internal/loop"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// Config is what a Producer is built from.
type Config struct {
	// Queue is the queue it works; MaxWorkers how many of its handlers
	// run at once.
	Queue      string
	MaxWorkers int
	// Claims claims its jobs; Exec runs them.
	Claims *Claimer
	Exec   *executor.Executor
	// Lookup returns the worker of a kind, nil when none knows it.
	Lookup func(kind string) *executor.Worker
	Log    *slog.Logger
	// BatchDelay is Config.ClaimBatchDelay.
	BatchDelay time.Duration
	// ClaimAheadWindow and JobLease bound how much work it holds claimed
	// ahead with a backlog (see claimHorizon).
	ClaimAheadWindow, JobLease time.Duration
	// ClaimAged, a test hook, makes claims look this much older.
	ClaimAged time.Duration
}

// Producer claims jobs of one queue up to its free slots and hands each to
// an executor goroutine.
type Producer struct {
	queue  string
	max    int // MaxWorkers: handlers running at once
	claims *Claimer
	exec   *executor.Executor
	lookup func(kind string) *executor.Worker
	log    *slog.Logger
	// batchDelay is Config.ClaimBatchDelay.
	batchDelay time.Duration
	// horizon is how much work to hold claimed ahead with a backlog
	// (claimHorizon), and aheadMost the most jobs held so.
	horizon   time.Duration
	aheadMost int
	// claimAged, a test hook, makes claims look this much older.
	claimAged time.Duration

	// handed holds the jobs handed over and not yet taken by an executor.
	// Executors, started as needed up to max and kept (a goroutine per
	// job would grow a fresh stack for every job), take them in turn, one
	// at a time, and wait on ready when it is empty. An executor done with
	// a job takes the next itself: a job that takes microseconds costs no
	// goroutine switch, where a channel woke one executor per job.
	qmu    sync.Mutex
	ready  *sync.Cond // on qmu
	handed []*executor.ClaimedJob
	next   int  // handed[next:] wait
	closed bool // Run ended: executors end once handed is empty
	// parked executors wait on ready; waking ones were signalled or
	// started and have not yet looked at the queue. All under qmu.
	parked, waking int
	executors      int
	executorsEnded sync.WaitGroup
	wakeCh         chan struct{} // capacity 1: a pending wake-up
	// finished counts the jobs finished since the producer last looked;
	// doneCh (capacity 1) tells it to look. One wake-up per batch of
	// finished jobs instead of a channel send per job.
	finished atomic.Int64
	doneCh   chan struct{}
	// flow is the queue's Flow as the last poll saw it.
	flow atomic.Pointer[Flow]
}

// Flow is how a queue's flow limits bear on its claims, as the poller
// reads them from the queue's row.
type Flow struct {
	// Limited: the queue has a limit, so claims run sql/claim_flow.sql
	// and try again soon after one the limits cut short.
	Limited bool
	// QueueWide: a limit holds the whole queue (MaxRunning, or a rate of
	// the queue rather than of each key). Its slots are shared by every
	// client, so claims are only for idle workers: a job claimed ahead, or
	// a claim waiting to gather a batch, would hold back a slot that
	// another client's idle worker could use. Limits per key leave the
	// queue's other keys flowing, so such queues claim ahead as others do.
	QueueWide bool
	// RateGap is the queue's rate period divided by its rate limit: how
	// soon a start held back by the rate may be allowed. Zero without a
	// rate limit.
	RateGap time.Duration
	// Sequenced: the queue has available jobs of a sequence, which only a
	// claim under the claim lock takes, so every claim takes the lock.
	Sequenced bool
}

// flowRetry is how soon a producer whose claim the limits cut short tries
// again when no rate says sooner: a slot another client frees is taken
// within it. Its own results wake it sooner (WakeFlow).
const flowRetry = 100 * time.Millisecond

// New returns the producer of cfg.Queue, which runs up to cfg.MaxWorkers
// handlers at once through cfg.Exec, claiming with cfg.Claims. Start it
// with Run.
func New(cfg Config) *Producer {
	maxWorkers := cfg.MaxWorkers
	aheadMost := max(maxWorkers, claimAheadMost(maxWorkers))
	p := &Producer{
		queue: cfg.Queue, max: maxWorkers, claims: cfg.Claims, exec: cfg.Exec, lookup: cfg.Lookup, log: cfg.Log,
		batchDelay: cfg.BatchDelay, horizon: claimHorizon(cfg.ClaimAheadWindow, cfg.JobLease), aheadMost: aheadMost, claimAged: cfg.ClaimAged,
		wakeCh: make(chan struct{}, 1),
		doneCh: make(chan struct{}, 1),
	}
	p.ready = sync.NewCond(&p.qmu)
	return p
}

// dispatch hands claimed jobs to the executors.
func (p *Producer) dispatch(jobs []executor.ClaimedJob) {
	p.qmu.Lock()
	if p.next > 0 {
		// Drop what was taken: a queue that never empties would grow.
		n := copy(p.handed, p.handed[p.next:])
		clear(p.handed[n:])
		p.handed, p.next = p.handed[:n], 0
	}
	for i := range jobs {
		p.handed = append(p.handed, &jobs[i])
	}
	p.wakeExecutors()
	p.qmu.Unlock()
}

// wakeExecutors wakes (or starts, up to max) executors for the jobs in the
// queue; under qmu. Not one per job: a few at a time, each of which wakes
// another as it takes a job while jobs are left. Jobs that take
// microseconds are run by the few executors awake, each taking the next as
// it finishes one; jobs that take longer wake an executor each, one after
// another, a few in parallel.
func (p *Producer) wakeExecutors() {
	waiting := len(p.handed) - p.next
	for p.waking < min(waiting, 1+waiting/wakeSpread) {
		switch {
		case p.parked > 0:
			p.parked--
			p.ready.Signal()
		case p.executors < p.max:
			p.executors++
			p.executorsEnded.Add(1)
			go p.runExecutor()
		default:
			return // every executor runs a job; each takes the next when done
		}
		p.waking++
	}
}

// wakeSpread: with n jobs waiting, up to 1+n/wakeSpread executors are
// being woken at once.
const wakeSpread = 64

// runExecutor runs jobs from the queue until it is closed and empty. It
// starts, or wakes, counted in waking, and takes a job at once.
func (p *Producer) runExecutor() {
	defer p.executorsEnded.Done()
	p.qmu.Lock()
	p.waking--
	for {
		if p.next == len(p.handed) {
			if p.closed {
				p.qmu.Unlock()
				return
			}
			// Empty: drop what was taken, keeping the array.
			clear(p.handed)
			p.handed, p.next = p.handed[:0], 0
			p.parked++
			p.ready.Wait() // Signal and Broadcast count this one in waking
			p.waking--
			continue
		}
		j := p.handed[p.next]
		p.handed[p.next] = nil
		p.next++
		p.wakeExecutors()
		p.qmu.Unlock()
		p.exec.Execute(j)
		p.jobDone()
		p.qmu.Lock()
	}
}

// closeQueue tells the executors that no job will be handed over any
// more: they end once the queue is empty.
func (p *Producer) closeQueue() {
	p.qmu.Lock()
	p.closed = true
	p.waking += p.parked
	p.parked = 0
	p.ready.Broadcast()
	p.qmu.Unlock()
}

// WaitExecutors waits until the executors have run every job handed over
// and ended; Run closes their queue when it returns.
func (p *Producer) WaitExecutors() { p.executorsEnded.Wait() }

// jobDone tells the producer that one of its jobs finished.
func (p *Producer) jobDone() {
	p.finished.Add(1)
	select {
	case p.doneCh <- struct{}{}:
	default: // a signal is pending: the producer will count this one too
	}
}

// Wake tells the producer that jobs may be waiting that no claim has seen.
func (p *Producer) Wake() {
	select {
	case p.wakeCh <- struct{}{}:
	default:
	}
}

// WakeFlow is Wake with the queue's flow limits as the poller read them.
func (p *Producer) WakeFlow(f Flow) {
	if old := p.flow.Load(); old == nil || *old != f {
		p.flow.Store(&f)
	}
	p.Wake()
}

// QueueWide reports whether the queue has a queue-wide flow limit, as the
// last poll saw it: its results are then written without waiting for a
// batch, since each frees a slot that every client's claims wait for.
func (p *Producer) QueueWide() bool {
	f := p.flow.Load()
	return f != nil && f.QueueWide
}

// SlotsFreed tells the producer that results of its queue were written:
// with flow limits, the slots they held are free now, not when the
// handlers returned; in a sequence, the next job may start now. Without
// this wake-up a sequence's next job waited for the poll.
func (p *Producer) SlotsFreed() {
	if f := p.flow.Load(); f == nil || (!f.Limited && !f.Sequenced) {
		return
	}
	select {
	case p.wakeCh <- struct{}{}:
	default:
	}
}

// Run claims and dispatches until ctx (the client's fetch context) ends,
// then dispatches what claims still in flight bring and closes the
// executors' queue.
func (p *Producer) Run(ctx context.Context) {
	results := make(chan claimResult, maxClaimsInFlight)
	inflight := 0 // claims sent and not yet answered
	reserved := 0 // the jobs those claims may bring
	running := 0  // jobs dispatched and not yet finished
	dispatch := func(r claimResult) {
		received := time.Now()
		if p.claimAged != 0 {
			r.sent, received = r.sent.Add(-p.claimAged), received.Add(-p.claimAged)
		}
		// One allocation per claim for its jobs on their way (and their
		// entries in the registry of running jobs), not one per job.
		cjs := make([]executor.ClaimedJob, len(r.jobs))
		var w *executor.Worker
		kind := ""
		for i, row := range r.jobs {
			running++
			if i == 0 || row.Kind != kind { // a claim's rows mostly share a kind
				w, kind = p.lookup(row.Kind), row.Kind
			}
			cjs[i].Set(row, w, r.sent, received)
		}
		p.dispatch(cjs)
	}
	defer func() {
		// Claims in flight may commit: their jobs are run like the others.
		// Then executors finish the jobs handed over, and end.
		for ; inflight > 0; inflight-- {
			dispatch(<-results)
		}
		p.closeQueue()
	}()
	fetchNow := true
	// refill fires a claim for the room made so far, ClaimBatchDelay after
	// the first of it (see below).
	refill := time.NewTimer(time.Hour)
	refill.Stop()
	defer refill.Stop()
	refillArmed := false
	refillDue := false // the refill timer fired: claim whatever room there is
	// more is true while the last claim filled all the room it asked for,
	// so the queue probably holds more: a finished job is then a reason to
	// claim again at once rather than at the next poll.
	more := false
	// woken is true when a notification, the poller or the scheduler asked
	// for this claim: jobs are waiting that no claim has seen, so it goes
	// out at once.
	woken := false
	var a claimAhead // the rate of finished jobs and claims' latency
	// A claim failing at every wake-up (the database down) is said when
	// it starts, every 30 s and when it ends.
	failures := loop.NewFailureLog(p.log.With("queue", p.queue), "pgqueue: claim failed", "pgqueue: claims succeed again")
	for {
		// room is how many jobs a claim may take now: the free slots, and
		// with a backlog also the jobs expected to finish over the claim
		// horizon (or a claim's round trip), so that the next batch is
		// there when they do, and claims are large batches however few
		// the workers.
		flow := Flow{}
		if f := p.flow.Load(); f != nil {
			flow = *f
		}
		ahead := 0
		if more && !flow.QueueWide {
			ahead = a.jobs(p.horizon, p.aheadMost)
		}
		room := p.max + ahead - running - reserved
		// free is how many workers would be idle now without a claim.
		free := p.max - running - reserved
		// With a backlog, jobs finishing every few microseconds would make
		// claims of a few rows each, and every claim is a commit. So a
		// claim waits for a whole batch of room (MaxWorkers, or the jobs
		// held ahead if more): while every worker has a job, it simply
		// waits; once one would be idle, it waits at most ClaimBatchDelay
		// from then and claims all the room made by then.
		if fetchNow && !woken && !refillDue && !flow.QueueWide && room > 0 && room < max(p.max, ahead) && running > 0 {
			switch {
			case free <= 0:
				fetchNow = false
			case p.batchDelay > 0:
				if !refillArmed {
					refill.Reset(p.batchDelay)
					refillArmed = true
				}
				fetchNow = false
			}
		}
		// No claim takes more than aheadMost (at least MaxWorkers) rows;
		// room beyond that goes to the next claim.
		for fetchNow && room > 0 && inflight < maxClaimsInFlight && ctx.Err() == nil {
			if refillArmed {
				refill.Stop()
				refillArmed = false
			}
			refillDue, woken = false, false
			sent := time.Now()
			a.sending(sent)
			want := min(room, p.aheadMost)
			inflight++
			reserved += want
			room -= want
			fetchNow = room > 0
			limited := flow.Limited
			// The claim lock makes claims of a busy queue cheaper, and is
			// needed by a limited queue's and a sequence's; without a
			// backlog it would be one more statement for each.
			locked := more || flow.Limited || flow.Sequenced
			go func() {
				jobs, backlog, err := p.claims.Claim(p.queue, want, limited, locked)
				results <- claimResult{want: want, sent: sent, jobs: jobs, backlog: backlog, err: err, flow: limited}
			}()
		}
		select {
		case <-ctx.Done():
			return
		case r := <-results:
			inflight--
			reserved -= r.want
			a.returned(r.sent)
			if r.err != nil {
				if !errors.Is(r.err, pgqueuetype.ErrSchemaOutdated) { // said once by the schema watch
					failures.Failed(ctx, r.err)
				}
				more = false
				continue
			}
			failures.Succeeded(ctx)
			dispatch(r)
			more = len(r.jobs) == r.want
			fetchNow = fetchNow || more
			if r.flow && !more && r.backlog && !refillArmed {
				// The limits cut the claim short: try again once a start
				// or a slot may have come free.
				retry := flowRetry
				if flow.RateGap > 0 {
					retry = min(retry, max(flow.RateGap, 5*time.Millisecond))
				}
				refill.Reset(retry)
				refillArmed = true
			}
		case <-p.doneCh:
			// Every job that finished meanwhile counts, so one claim fills
			// all the free slots.
			n := int(p.finished.Swap(0))
			running -= n
			a.finished += n
			// A wake-up that came while every slot was taken still counts.
			fetchNow = fetchNow || more
		case <-p.wakeCh:
			fetchNow, woken = true, true
		case <-refill.C:
			refillArmed = false
			refillDue = true
			fetchNow = true
		}
	}
}

// maxClaimsInFlight is how many claims a producer may have sent and not yet
// seen answered. One: the jobs claimed ahead cover a claim's round trip,
// and claims of a queue run one at a time anyway (sql/claim_lock.sql). A
// second claim in flight made four processes of 100 workers cost the
// server a third more per job (docs/dev/measurements/2026-12-03-round-2.md, "Claims one at a
// time").
const maxClaimsInFlight = 1

// claimResult is what a claim sent by a producer brought back.
type claimResult struct {
	want int
	sent time.Time
	jobs []*pgqueuetype.JobRow
	err  error
	// backlog: the queue probably holds more (Claimer.Claim).
	backlog bool
	flow    bool // claimed with the queue's flow limits
}
