// Package completer owns the writing of job results: it gathers the
// results of finished jobs for a few milliseconds and writes each batch in
// one fenced statement (sql/finish.sql, sql/complete_many.sql), reading the
// jobs back when a reply was lost.
//
// It may import pgqueuetype and internal/jobsql; what the client hands
// down (the query function, the observer's callbacks) comes in Config.
package completer

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// The result operations of sql/finish.sql.
const (
	OpComplete = "complete"
	OpFail     = "fail"
	OpCancel   = "cancel"
	OpSnooze   = "snooze"
	OpRelease  = "release"
	// OpDiscard ends a job discarded at once; OpUnknownKind snoozes a job
	// whose kind has no worker, marking its entry in errors.
	OpDiscard     = "discard"
	OpUnknownKind = "unknown_kind"
)

// Observer holds the callbacks the completer (and the executor, about the
// same jobs) calls: the client's Observer fields of the same names. Each
// may be nil.
type Observer struct {
	// BatchWritten is told the size of each batch written.
	BatchWritten func(jobs int)
	// ResultRecorded is told of each job whose result was written.
	ResultRecorded func(job *pgqueuetype.JobRow, result pgqueuetype.Outcome)
	// WriteRefused is told of each write a job's fence refused.
	WriteRefused func(job *pgqueuetype.JobRow, write pgqueuetype.FencedWrite)
}

// QueryFunc runs a statement: a pool's Query, or a test's replacement.
type QueryFunc func(ctx context.Context, sql string, args ...any) (pgx.Rows, error)

// Config is what a Completer is built from.
type Config struct {
	// Query runs the writes: the pool's Query, or a test hook.
	Query    QueryFunc
	Queries  *jobsql.Queries
	Outcomes *jobsql.OutcomeReader
	Log      *slog.Logger
	Observer Observer
	// Base is the parent of its writes, detached from Stop.
	Base context.Context
	// BatchSize is the most results one statement writes; BatchDelay is
	// how long the first result of a batch waits for others.
	BatchSize  int
	BatchDelay time.Duration
	// GiveUp is how long a batch whose writes keep failing is retried: a
	// job lease, after which its jobs are rescued anyway.
	GiveUp time.Duration
}

// Result is what happened to one claimed job, waiting to be written.
type Result struct {
	Row *pgqueuetype.JobRow
	// Op is one of the Op constants.
	Op    string
	Err   *string // kept in the job's errors when not nil
	Trace *string
	Delay time.Duration // before the next run: fail, snooze
	// Written, if set, runs once the result is written or given up on.
	Written func()
}

// Outcome names what the result's op does to its job.
func (r *Result) Outcome() pgqueuetype.Outcome {
	switch r.Op {
	case OpComplete:
		return pgqueuetype.OutcomeCompleted
	case OpFail:
		if r.Row.Attempt >= r.Row.MaxAttempts {
			return pgqueuetype.OutcomeDiscarded
		}
		return pgqueuetype.OutcomeRetried
	case OpDiscard:
		return pgqueuetype.OutcomeDiscarded
	case OpCancel:
		return pgqueuetype.OutcomeCancelled
	case OpSnooze, OpUnknownKind:
		return pgqueuetype.OutcomeSnoozed
	default:
		return pgqueuetype.OutcomeReleased
	}
}

// Completer gathers job results for a few milliseconds, or up to a batch
// limit, and writes each batch in one fenced statement; while batches
// release dependents it writes without gathering. Its input is
// bounded: when writes fall behind, executors wait, their slots stay
// taken, and producers stop claiming. Executors append to a shared list
// and wake the completer only for the first result of a batch and for a
// full one, not for every result.
type Completer struct {
	query    QueryFunc
	q        *jobsql.Queries
	outcomes *jobsql.OutcomeReader
	log      *slog.Logger
	obs      Observer
	base     context.Context
	giveUp   time.Duration
	wrote    func(queue string)
	// settled is told how many dependents (jobs waiting for the batch's
	// jobs) a written batch released or cancelled, when any.
	settled func(n int)
	// hurried tells the queues whose results are written at once, without
	// waiting for a batch; urgent is set while one of those waits.
	hurried func(queue string) bool
	urgent  bool

	// pending holds the results handed over and not yet taken, at most
	// maxPending (four batches); ready (capacity 1) says it has a first
	// result or a full batch; space is closed, and replaced, when run
	// takes results from a full list.
	mu         sync.Mutex
	pending    []Result
	maxPending int
	ready      chan struct{}
	space      chan struct{}
	quit       chan struct{} // closed by Stop once no executor will send
	hurry      chan struct{} // closed when Stop's context ended: stop retrying
	done       chan struct{}
	limit      int
	delay      time.Duration
	// Buffers of Exec, reused batch after batch.
	ids, fences, delays []int64
	idsText, fencesText []byte
	ops                 []string
	errs, traces        []*string
	// refusedIDs holds the ids the statement refused, as its rows name
	// them.
	refusedIDs map[int64]bool
	// settledN is what the last Exec's statement settled.
	settledN int
}

// New returns a completer that writes batches of up to cfg.BatchSize
// results, gathered for up to cfg.BatchDelay. Start it with Run.
func New(cfg Config) *Completer {
	limit := cfg.BatchSize
	return &Completer{
		query:      cfg.Query,
		q:          cfg.Queries,
		outcomes:   cfg.Outcomes,
		log:        cfg.Log,
		obs:        cfg.Observer,
		base:       cfg.Base,
		giveUp:     cfg.GiveUp,
		pending:    make([]Result, 0, limit*4),
		maxPending: limit * 4,
		ready:      make(chan struct{}, 1),
		space:      make(chan struct{}),
		quit:       make(chan struct{}),
		hurry:      make(chan struct{}),
		done:       make(chan struct{}),
		limit:      limit,
		delay:      cfg.BatchDelay,
	}
}

// Stop writes what is still queued and waits for it, once no executor
// sends any more. When ctx ends first, failing writes are no longer
// retried: the rescuer will find those jobs.
func (k *Completer) Stop(ctx context.Context) {
	stopHurry := context.AfterFunc(ctx, func() { close(k.hurry) })
	defer stopHurry()
	close(k.quit)
	<-k.done
}

// Send hands a result over, unless the completer has already finished (a
// handler that outlived Stop): then the job stays running until its lease
// ends and the rescuer takes it.
func (k *Completer) Send(r Result) {
	// Asked before the lock: executors of every queue contend for it.
	urgent := k.hurried != nil && k.hurried(r.Row.Queue)
	for {
		k.mu.Lock()
		if n := len(k.pending); n < k.maxPending {
			k.pending = append(k.pending, r)
			k.urgent = k.urgent || urgent
			k.mu.Unlock()
			if n == 0 || n+1 == k.limit || urgent { // a first result, a full batch, or one in a hurry
				k.signal()
			}
			return
		}
		space := k.space
		k.mu.Unlock()
		select {
		case <-space:
		case <-k.done:
			k.log.Warn("pgqueue: job finished after stop; left for rescue", "job", r.Row.ID, "kind", r.Row.Kind)
			if r.Written != nil {
				r.Written()
			}
			return
		}
	}
}

// signal wakes run; a wake-up already pending is enough.
func (k *Completer) signal() {
	select {
	case k.ready <- struct{}{}:
	default:
	}
}

// waiting is how many results are handed over and not yet taken.
func (k *Completer) waiting() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.pending)
}

// gathering reports whether a batch should wait for more results: it is
// not full, no waiting result is in a hurry, and the last batch written
// released no dependents. While batches release or cancel dependents a
// workflow is moving, and its next jobs wait for these results (a chain's
// step for one result alone: gathering made a step 2.5 to 3 times as
// long); under load, batches form while the previous one is written
// whether or not they gather.
func (k *Completer) gathering() bool {
	if k.settledN > 0 {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.pending) < k.limit && !k.urgent
}

// take moves up to a batch of the oldest waiting results to batch.
func (k *Completer) take(batch []Result) []Result {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := min(len(k.pending), k.limit)
	batch = append(batch, k.pending[:n]...)
	full := len(k.pending) == k.maxPending
	left := copy(k.pending, k.pending[n:])
	clear(k.pending[left:]) // no stale rows kept alive
	k.pending = k.pending[:left]
	// Results left over (more than a batch waited) may hold the hurried
	// one: stay in a hurry for them.
	k.urgent = k.urgent && left > 0
	if full && n > 0 {
		close(k.space)
		k.space = make(chan struct{})
	}
	return batch
}

// Run gathers and writes results until Stop.
func (k *Completer) Run() {
	defer close(k.done)
	batch := make([]Result, 0, k.limit)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-k.ready:
		case <-k.quit:
			for {
				if batch = k.take(batch[:0]); len(batch) == 0 {
					return
				}
				k.write(batch)
			}
		}
		// Gather for up to delay from the first result, or until the
		// batch is full (the executor that fills it signals).
		if k.gathering() {
			timer.Reset(k.delay)
		gather:
			for k.gathering() {
				select {
				case <-k.ready:
				case <-timer.C:
					break gather
				case <-k.quit:
					// Stop writes at once; it does not wait out the delay.
					break gather
				}
			}
			timer.Stop()
		}
		if batch = k.take(batch[:0]); len(batch) > 0 {
			k.write(batch)
		}
		if k.waiting() > 0 { // results came meanwhile: gather them too
			k.signal()
		}
	}
}

// write records a batch. When the statement's outcome is unknown it reads
// the jobs back by id and fence, keeps what landed and writes the rest
// again: the fence makes a repeated write safe. Jobs the statement did not
// update had lost their claim and are reported, never retried. It gives up
// after a lease's time; the jobs left running are then rescued.
func (k *Completer) write(batch []Result) {
	defer func() {
		for i, r := range batch {
			if r.Written != nil {
				r.Written()
			}
			// A batch's rows mostly share a queue: each queue once in a row.
			if k.wrote != nil && (i == 0 || r.Row.Queue != batch[i-1].Row.Queue) {
				k.wrote(r.Row.Queue)
			}
		}
	}()
	// In id order, the order the statement then locks its rows in: other
	// writers of many jobs (JobCancelMany) lock theirs in id order too, and
	// two that took the same rows in different orders deadlocked.
	slices.SortFunc(batch, func(a, b Result) int { return cmp.Compare(a.Row.ID, b.Row.ID) })
	pending := batch
	giveUp := time.Now().Add(k.giveUp)
	for wait := 50 * time.Millisecond; len(pending) > 0; wait = min(2*wait, time.Second) {
		refused, err := k.Exec(pending)
		switch {
		case err == nil:
			// Before the executors and the observer are told: the jobs
			// just released are waiting, and this client may claim them
			// now rather than when the NOTIFY or the poll reaches it.
			if k.settledN > 0 && k.settled != nil {
				k.settled(k.settledN)
			}
			k.reportWritten(pending, refused)
			return
		case isServerError(err):
			// The server answered: the statement failed and changed nothing.
			k.log.Error("pgqueue: recording job results failed", "jobs", len(pending), "err", err)
			return
		case !pgconn.SafeToRetry(err):
			// The statement may have run: learn which jobs it ended.
			if left, ok := k.unfinished(pending); ok {
				pending = left
			}
		}
		if len(pending) == 0 {
			return
		}
		if time.Now().After(giveUp) {
			k.log.Error("pgqueue: giving up recording job results; their jobs will be rescued", "jobs", len(pending), "err", err)
			return
		}
		select {
		case <-time.After(wait):
		case <-k.hurry:
			k.log.Error("pgqueue: stop deadline passed while recording job results; their jobs will be rescued", "jobs", len(pending), "err", err)
			return
		}
	}
}

// Exec writes batch in one statement, once, and returns the ids of the
// batch's jobs it did not update: their claim was lost (a stale fence, a
// job no longer running, or deleted). Every other job of the batch was
// written. The map is reused by the next call; it is nil with an error,
// when nothing is known of the batch. The completer's writes go through
// it; tests call it to write as the completer does.
func (k *Completer) Exec(batch []Result) (refused map[int64]bool, err error) {
	k.ids, k.fences, k.delays = k.ids[:0], k.fences[:0], k.delays[:0]
	k.ops, k.errs, k.traces = k.ops[:0], k.errs[:0], k.traces[:0]
	allComplete := true
	for _, r := range batch {
		k.ids, k.fences, k.ops = append(k.ids, r.Row.ID), append(k.fences, r.Row.Fence), append(k.ops, r.Op)
		k.errs, k.traces, k.delays = append(k.errs, r.Err), append(k.traces, r.Trace), append(k.delays, r.Delay.Microseconds())
		allComplete = allComplete && r.Op == OpComplete
	}
	// The statements run in QueryExecModeExec, which sends every parameter
	// as text: pgx would box each element of an []int64 to write the same
	// text.
	k.idsText, k.fencesText = appendInt8Array(k.idsText[:0], k.ids), appendInt8Array(k.fencesText[:0], k.fences)
	ids, fences := string(k.idsText), string(k.fencesText)
	query := k.query
	ctx, cancel := context.WithTimeout(k.base, jobsql.WriteTimeout)
	defer cancel()
	var rows pgx.Rows
	switch {
	case allComplete && len(batch) == 1:
		// The batch of a quiet queue: a statement whose plan is kept
		// (complete_one.sql), where complete_many.sql is planned anew.
		rows, err = query(ctx, k.q.CompleteOne, k.ids[0], k.fences[0])
	case allComplete:
		rows, err = query(ctx, k.q.CompleteMany, jobsql.OneShotPlan, ids, fences)
	default:
		rows, err = query(ctx, k.q.Finish, jobsql.OneShotPlan, ids, fences, k.ops, k.errs, k.traces, k.delays)
	}
	k.settledN = 0
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if k.refusedIDs == nil {
		k.refusedIDs = make(map[int64]bool)
	}
	refused = k.refusedIDs
	clear(refused)
	n, counted, err := readResultRows(rows, refused)
	if err != nil {
		return nil, err
	}
	if !counted {
		// Without its count row the reply says nothing of the batch
		// (every job would pass for written): the write's outcome is read
		// back as after a lost reply.
		return nil, errors.New("pgqueue: the batch's result write returned no count row")
	}
	k.settledN = n
	return refused, nil
}

// readResultRows adds to ids the id of each row, and returns the count of
// settled dependents the rows carry; counted reports a row with a null id
// (the row that only carries the count). Each row is an id and the
// count (null when none was settled), both as text
// (QueryExecModeExec asks for no binary results): they are read without
// pgx's scan, which allocates.
func readResultRows(rows pgx.Rows, ids map[int64]bool) (settled int, counted bool, err error) {
	fds := rows.FieldDescriptions()
	text := len(fds) == 2 && fds[0].Format == pgtype.TextFormatCode && fds[1].Format == pgtype.TextFormatCode
	for rows.Next() {
		var id, c int64
		var idNull, cNull bool
		v := rows.RawValues()
		ok := text && len(v) == 2
		if ok {
			idNull, cNull = v[0] == nil, v[1] == nil
			if !idNull {
				id, ok = parseInt8Text(v[0])
			}
			if ok && !cNull {
				c, ok = parseInt8Text(v[1])
			}
		}
		if !ok {
			var pid, pc *int64
			if err := rows.Scan(&pid, &pc); err != nil {
				return 0, false, err
			}
			idNull, cNull = pid == nil, pc == nil
			if !idNull {
				id = *pid
			}
			if !cNull {
				c = *pc
			}
		}
		if idNull {
			counted = true
		} else {
			ids[id] = true
		}
		if !cNull {
			settled = int(c)
		}
	}
	return settled, counted, rows.Err()
}

// Settled is how many dependents the last Exec's statement released or
// cancelled (0 after an error).
func (k *Completer) Settled() int { return k.settledN }

// appendInt8Array appends the text form of a bigint[] holding vs.
func appendInt8Array(b []byte, vs []int64) []byte {
	b = append(b, '{')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, v, 10)
	}
	return append(b, '}')
}

// parseInt8Text parses a bigint in text format; ok is false for anything
// else (a binary value, NULL, a sign).
func parseInt8Text(b []byte) (n int64, ok bool) {
	if len(b) == 0 || len(b) > 18 { // 18 digits cannot overflow
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// unfinished reads the batch's jobs back and returns those still running
// under the batch's fence; it reports the ones another claim holds. ok is
// false when the read failed too.
func (k *Completer) unfinished(batch []Result) (left []Result, ok bool) {
	ids := make([]int64, len(batch))
	for i, r := range batch {
		ids[i] = r.Row.ID
	}
	states, err := k.outcomes.Read(ids)
	if err != nil {
		return nil, false
	}
	for _, r := range batch {
		switch states[r.Row.ID].Of(r.Row.Fence) {
		case jobsql.OutcomePending:
			left = append(left, r)
		case jobsql.OutcomeLost:
			k.refused(r)
		}
	}
	return left, true
}

// reportWritten tells the observer about a written batch, and logs the
// jobs the statement refused (did not update): they had lost their claim.
func (k *Completer) reportWritten(batch []Result, refused map[int64]bool) {
	recorded := k.obs.ResultRecorded
	for i := range batch {
		r := &batch[i]
		switch {
		case refused[r.Row.ID]:
			k.refused(*r)
		case recorded != nil:
			recorded(r.Row, r.Outcome())
		}
	}
	if f := k.obs.BatchWritten; f != nil {
		f(len(batch))
	}
}

// refused reports a result the job's fence refused: the job was taken
// over (rescued, or retried by hand) while this attempt ran.
func (k *Completer) refused(r Result) {
	k.log.Warn("pgqueue: job result refused", "job", r.Row.ID, "kind", r.Row.Kind, "queue", r.Row.Queue,
		"fence", r.Row.Fence, "attempt", r.Row.Attempt, "op", r.Op, "err", pgqueuetype.ErrJobLeaseLost)
	if f := k.obs.WriteRefused; f != nil {
		f(r.Row, pgqueuetype.WriteResult)
	}
}

// isServerError reports whether the server answered err: the statement
// failed and changed nothing. Serialization failures (40xxx) and
// shutdowns (57Pxx) are not counted: they are worth another try.
func isServerError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && !strings.HasPrefix(pgErr.Code, "40") && !strings.HasPrefix(pgErr.Code, "57P")
}

// Wrote sets what is told each queue of a batch once the batch is written
// (or given up on): flow-limited producers claim then, as the slots their
// jobs held are free. Call it before Run.
func (k *Completer) Wrote(f func(queue string)) { k.wrote = f }

// OnSettled sets what is told, after a batch is written, how many
// dependents it settled, when any: the client wakes its producers then.
// Call it before Run.
func (k *Completer) OnSettled(f func(n int)) { k.settled = f }

// Hurry sets which queues' results are written at once rather than
// gathered for BatchDelay: those of queues with a queue-wide flow limit,
// whose slots every client's claims wait for. Call it before Run.
func (k *Completer) Hurry(f func(queue string) bool) { k.hurried = f }
