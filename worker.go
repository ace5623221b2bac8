package pgqueue

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Worker works jobs of one kind. Work returns nil when the job is done, an
// error to have it retried (or discarded once its attempts are used up),
// JobCancel to end it without retry, or JobSnooze to run it again later.
//
// ctx ends when the job's timeout passes or the client stops; handlers must
// return soon after. Work may run again for the same job after a crash or a
// lost lease, so make it idempotent or fence its writes with job.Fence.
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
	mu     sync.RWMutex
	byKind map[string]*registeredWorker
}

// registeredWorker is a handler with its type erased.
type registeredWorker struct {
	timeout    time.Duration
	mode       SingletonMode
	retry      RetryPolicy // nil: the client's
	middleware []WorkMiddleware
	// decode turns a claimed row into the *Job[T] that work takes. The
	// producer decodes, not the executor: decoding JSON grows a goroutine's
	// stack, and a thousand executors, their stacks shrunk again at every
	// GC, would each pay for copying it.
	decode func(row *JobRow) (any, error)
	work   func(ctx context.Context, job any, grant lockGrant) error
}

// NewWorkers returns an empty registry.
func NewWorkers() *Workers {
	return &Workers{byKind: map[string]*registeredWorker{}}
}

// AddWorker registers w for the kind T's zero value names. opts may be nil.
// It returns ErrInvalid when the kind already has a worker,
// ErrInvalid when the kind is empty and ErrInvalid when
// opts.Middleware holds a nil.
func AddWorker[T JobArgs](ws *Workers, w Worker[T], opts *WorkerOpts) error {
	var zero T
	kind := zero.Kind()
	if err := validateKind(kind); err != nil {
		return err
	}
	if isNilValue(w) {
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
	ws.byKind[kind] = &registeredWorker{
		timeout:    opts.Timeout,
		mode:       opts.SingletonMode,
		retry:      opts.RetryPolicy,
		middleware: slices.Clone(opts.Middleware),
		decode: func(row *JobRow) (any, error) {
			job, err := decodeArgs[T](row)
			if err != nil {
				return nil, fmt.Errorf("%w job args: decode args of %s job %d: %w", ErrInvalid, kind, row.ID, err)
			}
			return job, nil
		},
		work: func(ctx context.Context, job any, grant lockGrant) error {
			j := job.(*Job[T])
			j.Tx, j.LockFence = grant.tx, grant.fence
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

func (ws *Workers) lookup(kind string) *registeredWorker {
	ws.mu.RLock()
	defer ws.mu.RUnlock()
	return ws.byKind[kind]
}
