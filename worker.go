package pgqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/pgqueue/pgqueue/internal/enqueue"
	"github.com/pgqueue/pgqueue/internal/executor"
	"github.com/pgqueue/pgqueue/internal/flatjson"
)

// Worker works jobs of one kind. Work returns nil when the job is done, an
// error to have it retried (or discarded once its attempts are used up),
// JobCancel to end it without retry, or JobSnooze to run it again later.
//
// ctx ends when the job's timeout passes or the client stops; handlers must
// return soon after. Work may run again for the same job after a crash or a
// lost lease, so make it idempotent or fence its writes with
// job.CheckFenceTx.
type Worker[T JobArgs] interface {
	Work(ctx context.Context, job *Job[T]) error
}

// WorkFunc adapts a function to Worker.
type WorkFunc[T JobArgs] func(ctx context.Context, job *Job[T]) error

// Work calls f.
func (f WorkFunc[T]) Work(ctx context.Context, job *Job[T]) error { return f(ctx, job) }

// WorkerOpts are the options of one registered kind.
type WorkerOpts struct {
	// Timeout bounds each run of the handler. Zero means Config.JobTimeout;
	// negative means no limit.
	Timeout time.Duration
	// SingletonMode is how jobs of this kind that have a SingletonKey hold
	// their lock. Default SingletonXact.
	SingletonMode SingletonMode
	// RetryPolicy computes the delay before a failed job of this kind is
	// attempted again, instead of Config.RetryPolicy. Default: the
	// client's. (A job rescued after its lease expired gets the rescuing
	// leader's Config.RetryPolicy: the leader need not know the kind.)
	RetryPolicy RetryPolicy
	// Middleware wraps this kind's handler, inside Config.WorkMiddleware,
	// the first outermost (see WorkMiddleware). Default none.
	Middleware []WorkMiddleware
}

// Workers holds the handlers of a client, by job kind. Register with
// AddWorker or AddWorkerFunc before starting the client.
type Workers struct {
	mu sync.RWMutex
	// byKind holds each kind's handler, its type erased, as the executor
	// runs it.
	byKind map[string]*executor.Worker
}

// NewWorkers returns an empty registry.
func NewWorkers() *Workers {
	return &Workers{byKind: map[string]*executor.Worker{}}
}

// AddWorker registers w for the kind T's zero value names. opts may be nil.
// It returns ErrInvalid when the kind is already registered, when it is
// empty or longer than 255 bytes, and when w or one of opts.Middleware is
// nil.
func AddWorker[T JobArgs](ws *Workers, w Worker[T], opts *WorkerOpts) error {
	var zero T
	kind := zero.Kind()
	if err := enqueue.ValidateKind(kind); err != nil {
		return err
	}
	if enqueue.IsNilValue(w) {
		return fmt.Errorf("%w option: kind %q: nil worker", ErrInvalid, kind)
	}
	if opts == nil {
		opts = &WorkerOpts{}
	}
	if slices.Contains(opts.Middleware, nil) {
		return fmt.Errorf("%w option: kind %q: nil middleware", ErrInvalid, kind)
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if _, ok := ws.byKind[kind]; ok {
		return fmt.Errorf("%w worker: kind already registered: %q", ErrInvalid, kind)
	}
	fast := flatjson.For[T]()
	ws.byKind[kind] = &executor.Worker{
		Timeout:     opts.Timeout,
		SessionLock: opts.SingletonMode == SingletonSession,
		Retry:       opts.RetryPolicy, // nil stays nil: the client's
		Middleware:  workMiddleware(opts.Middleware),
		Decode: func(row *JobRow) (any, error) {
			job, err := decodeArgs(row, fast)
			if err != nil {
				return nil, fmt.Errorf("%w job args: decode args of %s job %d: %w", ErrInvalid, kind, row.ID, err)
			}
			return job, nil
		},
		Work: func(ctx context.Context, job any, grant executor.LockGrant) error {
			j := job.(*Job[T])
			j.Tx, j.LockFence = grant.Tx, grant.Fence
			return w.Work(ctx, j)
		},
	}
	return nil
}

// AddWorkerFunc registers fn for the kind T's zero value names, like
// AddWorker.
func AddWorkerFunc[T JobArgs](ws *Workers, fn func(ctx context.Context, job *Job[T]) error, opts *WorkerOpts) error {
	if fn == nil {
		var zero T
		return fmt.Errorf("%w option: kind %q: nil worker func", ErrInvalid, zero.Kind())
	}
	return AddWorker[T](ws, WorkFunc[T](fn), opts)
}

// unmarshalArgs is json.Unmarshal(data, v) for a job's args (v points to
// a zero value), with a
// json.Decoder kept between calls: Unmarshal allocates its decoding state
// (about 200 bytes, four allocations) for every job. Args are read from a
// jsonb column, so one valid value: anything else, and args larger than a
// kept decoder's buffer should hold, go to json.Unmarshal, which says
// what is wrong as it always did.
func unmarshalArgs(data []byte, v any) error {
	if len(data) > argsDecoderMax {
		return json.Unmarshal(data, v)
	}
	d := argsDecoders.Get().(*argsDecoder)
	d.r.Reset(data)
	start := d.dec.InputOffset()
	err := d.dec.Decode(v)
	ok := err == nil && d.dec.InputOffset()-start == int64(len(data))
	d.r.Reset(nil)
	if !ok {
		// A decoder that failed, or stopped short of the end (trailing
		// space or data), keeps its state: drop it. What it decoded goes
		// too: Unmarshal decodes nothing from input that is not one value.
		reflect.ValueOf(v).Elem().SetZero()
		return json.Unmarshal(data, v)
	}
	argsDecoders.Put(d)
	return nil
}

// argsDecoderMax bounds the args a kept decoder decodes: its buffer grows
// to the largest.
const argsDecoderMax = 64 << 10

type argsDecoder struct {
	r   bytes.Reader
	dec *json.Decoder
}

var argsDecoders = sync.Pool{New: func() any {
	d := &argsDecoder{}
	d.dec = json.NewDecoder(&d.r)
	return d
}}

// lookup returns the worker of kind, nil when none is registered.
func (ws *Workers) lookup(kind string) *executor.Worker {
	ws.mu.RLock()
	defer ws.mu.RUnlock()
	return ws.byKind[kind]
}

// workMiddleware copies mws as the executor takes them; nil for none.
func workMiddleware(mws []WorkMiddleware) []executor.WorkMiddleware {
	if len(mws) == 0 {
		return nil
	}
	out := make([]executor.WorkMiddleware, len(mws))
	for i, m := range mws {
		out[i] = m
	}
	return out
}

// What a handler's error means besides "failed, retry": these two end the
// attempt differently (the executor's CancelError and SnoozeError).

// JobCancel, returned by a handler, ends the job as cancelled with no
// further attempts; err's text is kept in the job's errors. A nil err
// records "cancelled".
func JobCancel(err error) error {
	if err == nil {
		err = errors.New("cancelled")
	}
	return &executor.CancelError{Err: err}
}

// JobSnooze, returned by a handler, puts the job back to run again after d
// without spending an attempt. d ≤ 0 makes it available at once.
func JobSnooze(d time.Duration) error {
	return &executor.SnoozeError{After: d}
}

// SingletonMode is how a singleton job holds the lock of its key while it
// runs.
type SingletonMode int

const (
	// SingletonXact holds the key's lock with pg_advisory_xact_lock on a
	// transaction handed to the handler as Job.Tx. The lock dies with the
	// transaction: at commit, at rollback, or when the server ends the
	// session. The transaction runs with idle_in_transaction_session_timeout
	// set to the lease, so a holder paused longer than that (GC, SIGSTOP)
	// loses its session, its lock and its uncommitted work. The handler
	// must therefore not leave Job.Tx idle longer than Config.JobLease.
	SingletonXact SingletonMode = iota
	// SingletonSession holds the key's lock as a session advisory lock on
	// a connection dialled for it (see SessionLock), for handlers whose work
	// cannot run in one transaction. Before the handler starts, the lock's
	// fence is recorded for SingletonResource(key), so writes an earlier
	// holder fences with its older Job.LockFence are refused. The handler's
	// context is cancelled with pglock.ErrLost when the lock's connection dies.
	SingletonSession
)

// SingletonResource is the lock name, and the fence resource, of a
// singleton key.
func SingletonResource(key string) string { return executor.SingletonResource(key) }
