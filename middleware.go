package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/pgqueue/pgqueue/internal/executor"
)

// EnqueueParams is one job about to be enqueued, as enqueue middleware sees
// it: the options resolved (the args type's defaults under the caller's
// InsertOpts) and the args encoded. A middleware may change any field;
// the job is validated, as Enqueue validates it, after the last
// middleware called next. Meta and Tags are copies: changing them leaves
// the caller's InsertOpts alone.
type EnqueueParams struct {
	// Args are the args as the caller gave them, for reading: the job
	// stores EncodedArgs.
	Args JobArgs
	// Kind is Args.Kind().
	Kind string
	// EncodedArgs are the args as JSON, as they will be stored.
	EncodedArgs []byte
	// Queue is the job's queue; never empty.
	Queue string
	// Priority orders jobs within a queue: lower runs first.
	Priority int16
	// RunAt is when the job is due; zero for now.
	RunAt time.Time
	// MaxAttempts is how many attempts the job gets; 0 means
	// 25.
	MaxAttempts int
	// Tags are free labels kept with the job.
	Tags []string
	// Meta is free data kept with the job as JSON; nil for none. Set keys
	// here to carry data from the inserting process to the worker (a
	// trace context, a request id): the handler reads them in Job.Meta.
	Meta map[string]any
	// SingletonKey is the job's singleton key, empty for none.
	SingletonKey string
	// PartitionKey is the job's partition key for per-key flow limits,
	// empty for none (EnqueueOpts.PartitionKey).
	PartitionKey string
	// SequenceKey is the job's sequence key, empty for none
	// (EnqueueOpts.SequenceKey).
	SequenceKey string
	// Unique makes the job unique, nil for none.
	Unique *UniqueOpts
	// DependsOn, OnParentFailure, Name and Workflow place the job in a
	// workflow, as the EnqueueOpts fields of the same names.
	DependsOn       []Dependency
	OnParentFailure ParentFailurePolicy
	Name            string
	Workflow        int64
}

// EnqueuedJobs is what an enqueue did, as enqueue middleware sees it.
type EnqueuedJobs struct {
	// Rows holds, for Enqueue and EnqueueTx (and each periodic run), the
	// one job inserted, or the existing job a unique job duplicates.
	// EnqueueMany does not read its jobs back: nil.
	Rows []*JobRow
	// Enqueued counts the jobs inserted.
	Enqueued int64
	// Duplicates are the positions in the jobs, ascending, of the unique
	// jobs not inserted because an equal job existed.
	Duplicates []int
}

// EnqueueMiddleware wraps every insert of a client: Enqueue, EnqueueTx,
// EnqueueMany, EnqueueManyTx (whichever way they write: one statement,
// COPY, unique) and the periodic runs the maintenance leader enqueues.
//
// Insert sees the jobs about to be inserted, may change them, and calls
// next to run the rest of the chain and the insert itself, with the
// context the inner middleware and the insert get. It returns next's
// error, or one of its own to fail the insert; the caller gets that
// error, or when Insert returns nil the result next returned. Insert must
// call next at most once; returning nil without calling it fails the
// insert with ErrNotInserted (a periodic run skipped so counts as done).
//
// Inside a transaction (EnqueueTx, EnqueueManyTx, periodic runs) next's
// success means written, not committed.
type EnqueueMiddleware interface {
	Enqueue(ctx context.Context, jobs []*EnqueueParams, next func(ctx context.Context) (*EnqueuedJobs, error)) error
}

// EnqueueMiddlewareFunc adapts a function to EnqueueMiddleware.
type EnqueueMiddlewareFunc func(ctx context.Context, jobs []*EnqueueParams, next func(ctx context.Context) (*EnqueuedJobs, error)) error

// Enqueue calls f.
func (f EnqueueMiddlewareFunc) Enqueue(ctx context.Context, jobs []*EnqueueParams, next func(ctx context.Context) (*EnqueuedJobs, error)) error {
	return f(ctx, jobs, next)
}

// WorkMiddleware wraps the work of each attempt of a job.
//
// Work gets the job and its context and calls next to run the rest of the
// chain and the handler with the context it passes (add values to it for
// the handler to read). What Work returns is the attempt's outcome, read
// as a handler's would be: nil completes the job, JobSnooze and JobCancel
// do what they do, any other error fails the attempt. A panic in a
// handler reaches the middleware as a *PanicError returned by next; a
// panic in a middleware fails the attempt the same way.
//
// Config.WorkMiddleware wraps WorkerOpts.Middleware, which wraps the
// handler; within each list the first is the outermost. Middleware does
// not run for a job the client hands back unrun (an unknown kind, a
// singleton key held by another job, a claim that waited too long).
type WorkMiddleware interface {
	Work(ctx context.Context, job *JobRow, next func(ctx context.Context) error) error
}

// WorkMiddlewareFunc adapts a function to WorkMiddleware.
type WorkMiddlewareFunc func(ctx context.Context, job *JobRow, next func(ctx context.Context) error) error

// Work calls f.
func (f WorkMiddlewareFunc) Work(ctx context.Context, job *JobRow, next func(ctx context.Context) error) error {
	return f(ctx, job, next)
}

// OutcomeOf returns how an attempt whose work returned err ended; ctx is
// the job's context as the middleware got it, whose cause tells a
// cancellation from outside the handler (stop, lost lease, JobCancel) from
// a failure.
func OutcomeOf(ctx context.Context, err error) Outcome {
	if err == nil {
		return OutcomeCompleted
	}
	var (
		cancelErr *executor.CancelError
		snoozeErr *executor.SnoozeError
	)
	switch cause := context.Cause(ctx); {
	case errors.As(err, &cancelErr), errors.Is(err, ErrJobCancelled), errors.Is(cause, ErrJobCancelled):
		return OutcomeCancelled
	case errors.As(err, &snoozeErr):
		return OutcomeSnoozed
	case errors.Is(cause, ErrStopping):
		return OutcomeReleased
	case errors.Is(cause, ErrJobLeaseLost):
		return OutcomeLost
	}
	return OutcomeFailed
}

// runEnqueueMiddleware runs the client's enqueue middleware around insert,
// and returns insert's result unless a middleware failed the insert.
func (c *Client) runEnqueueMiddleware(ctx context.Context, jobs []*EnqueueParams, insert func(ctx context.Context) (*EnqueuedJobs, error)) (*EnqueuedJobs, error) {
	var (
		res    *EnqueuedJobs
		resErr error
		called bool
	)
	next := func(ctx context.Context) (*EnqueuedJobs, error) {
		if called {
			return nil, fmt.Errorf("%w option: enqueue middleware called next twice", ErrInvalid)
		}
		called = true
		res, resErr = insert(ctx)
		return res, resErr
	}
	mws := c.config.EnqueueMiddleware
	for i := len(mws) - 1; i >= 0; i-- {
		m, inner := mws[i], next
		next = func(ctx context.Context) (*EnqueuedJobs, error) {
			if err := m.Enqueue(ctx, jobs, inner); err != nil {
				return nil, err
			}
			if !called {
				return nil, ErrNotEnqueued
			}
			return res, resErr
		}
	}
	if _, err := next(ctx); err != nil {
		return nil, err
	}
	if resErr != nil { // a middleware ignored the insert's error
		return nil, resErr
	}
	return res, nil
}

// paramsForMiddleware copies the fields of p that middleware may change
// in place and that the caller's InsertOpts may share.
func paramsForMiddleware(p *EnqueueParams) {
	p.Tags = slices.Clone(p.Tags)
	p.Meta = maps.Clone(p.Meta)
	p.DependsOn = slices.Clone(p.DependsOn)
}
