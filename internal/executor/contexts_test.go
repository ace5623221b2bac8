package executor

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// handlerBundle is a job's context and its handler's, as Execute makes
// them, with the standard library's equivalent beside for comparison.
type handlerBundle struct {
	exec    *Executor
	job     *ActiveJob
	jobCtx  context.Context
	handler context.Context
}

func newHandlerBundle(t *testing.T, e *Executor, timeout time.Duration) *handlerBundle {
	t.Helper()
	if cancelCtxKey == nil {
		t.Fatal("the context package does not answer context.Cause's key as handlerCtx expects")
	}
	j := &ActiveJob{}
	jobCtx, cancel := e.jobContext(j)
	if cancel != nil {
		t.Fatal("jobContext fell back on context.WithCancelCause")
	}
	t.Cleanup(func() { j.endJob(nil) })
	h, stdCancel := e.handlerContext(j, jobCtx, timeout, time.Now())
	if stdCancel != nil {
		t.Fatal("handlerContext fell back on context.WithTimeout")
	}
	if timeout > 0 {
		e.deadlines.add(&j.handler)
	}
	return &handlerBundle{exec: e, job: j, jobCtx: jobCtx, handler: h}
}

func newTestExecutor() *Executor {
	return &Executor{deadlines: newDeadlines(), jobParent: context.WithValue(context.Background(), testKey{}, "parent's")}
}

func waitDone(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: Done not closed", what)
	}
}

// The handler's context ends as context.WithTimeout(jobCtx, timeout)
// would, in each way it can end: Err, context.Cause, Deadline, and the
// contexts derived from it (WithCancel, WithTimeout, AfterFunc).
func TestHandlerContext(t *testing.T) {
	defer goleak.VerifyNone(t)
	tests := map[string]struct {
		timeout time.Duration
		end     func(b *handlerBundle)
		// wantErr and wantCause are the handler's context's, and its
		// derived contexts'.
		wantErr, wantCause error
		// jobCause is the job's context's cause, nil while it runs.
		jobCause error
	}{
		"DeadlinePasses": {
			timeout: 20 * time.Millisecond,
			end:     func(b *handlerBundle) { waitDone(t, b.handler, "timeout") },
			wantErr: context.DeadlineExceeded, wantCause: context.DeadlineExceeded,
		},
		"JobCancelled": {
			timeout:   time.Minute,
			end:       func(b *handlerBundle) { b.job.requestCancel() },
			wantErr:   context.Canceled,
			wantCause: pgqueuetype.ErrJobCancelled, jobCause: pgqueuetype.ErrJobCancelled,
		},
		"LeaseLostWithoutTimeout": {
			timeout:   -1,
			end:       func(b *handlerBundle) { b.job.cancelWith(pgqueuetype.ErrJobLeaseLost) },
			wantErr:   context.Canceled,
			wantCause: pgqueuetype.ErrJobLeaseLost, jobCause: pgqueuetype.ErrJobLeaseLost,
		},
		"HandlerReturned": {
			timeout: time.Minute,
			end:     func(b *handlerBundle) { b.exec.endHandler(b.job, nil) },
			wantErr: context.Canceled, wantCause: context.Canceled,
		},
		"CancelledAfterDeadline": {
			timeout: 10 * time.Millisecond,
			end: func(b *handlerBundle) {
				waitDone(t, b.handler, "timeout")
				b.job.cancelWith(pgqueuetype.ErrStopping)
			},
			wantErr: context.DeadlineExceeded, wantCause: context.DeadlineExceeded, jobCause: pgqueuetype.ErrStopping,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			e := newTestExecutor()
			b := newHandlerBundle(t, e, tt.timeout)
			start := time.Now()
			if dl, ok := b.handler.Deadline(); ok != (tt.timeout > 0) || ok && (dl.Before(start.Add(tt.timeout-time.Second)) || dl.After(start.Add(tt.timeout))) {
				t.Errorf("Deadline = %v, %t; want about now+%v", dl, ok, tt.timeout)
			}
			if b.handler.Err() != nil || context.Cause(b.handler) != nil {
				t.Fatalf("a running handler's context has ended: %v", context.Cause(b.handler))
			}
			// Contexts derived before the end, and a context value.
			child, cancelChild := context.WithCancel(b.handler)
			defer cancelChild()
			timed, cancelTimed := context.WithTimeout(b.handler, time.Hour)
			defer cancelTimed()
			jobChild, cancelJobChild := context.WithCancel(b.jobCtx)
			defer cancelJobChild()
			afterRan := make(chan struct{})
			context.AfterFunc(b.handler, func() { close(afterRan) })
			if JobFromContext(child) != b.job || child.Value(testKey{}) != "parent's" {
				t.Error("values of the job's context not passed on")
			}

			tt.end(b)
			for what, ctx := range map[string]context.Context{"handler": b.handler, "WithCancel": child, "WithTimeout": timed} {
				waitDone(t, ctx, what)
				if err := ctx.Err(); err != tt.wantErr {
					t.Errorf("%s: Err = %v, want %v", what, err, tt.wantErr)
				}
				if cause := context.Cause(ctx); cause != tt.wantCause {
					t.Errorf("%s: Cause = %v, want %v", what, cause, tt.wantCause)
				}
			}
			<-afterRan
			// Derived after the end: ended at once, the same way.
			late, cancelLate := context.WithCancel(b.handler)
			defer cancelLate()
			if late.Err() != tt.wantErr || context.Cause(late) != tt.wantCause {
				t.Errorf("context derived after the end: %v, %v", late.Err(), context.Cause(late))
			}
			// The job's context, and one derived from it before the end,
			// as a context.WithCancelCause cancelled with the cause.
			if got := context.Cause(b.jobCtx); got != tt.jobCause {
				t.Errorf("job's context: Cause = %v, want %v", got, tt.jobCause)
			}
			if tt.jobCause != nil {
				waitDone(t, jobChild, "job's derived context")
				if b.jobCtx.Err() != context.Canceled || jobChild.Err() != context.Canceled || context.Cause(jobChild) != tt.jobCause {
					t.Errorf("job's context: Err %v; derived: Err %v, Cause %v", b.jobCtx.Err(), jobChild.Err(), context.Cause(jobChild))
				}
			} else if jobChild.Err() != nil {
				t.Errorf("job's derived context ended: %v", jobChild.Err())
			}
			e.endHandler(b.job, nil) // as Execute does, whatever ended it
			e.deadlines.mu.Lock()
			defer e.deadlines.mu.Unlock()
			if len(e.deadlines.heap) != 0 {
				t.Errorf("heap holds %d after the handler ended", len(e.deadlines.heap))
			}
		})
	}
}

// One timer times out many handlers in their deadlines' order, whatever
// order they were added and removed in.
func TestDeadlinesHeap(t *testing.T) {
	defer goleak.VerifyNone(t)
	e := newTestExecutor()
	const n = 200
	bundles := make([]*handlerBundle, n)
	for i := range bundles {
		bundles[i] = newHandlerBundle(t, e, time.Duration(20+rand.IntN(200))*time.Millisecond)
	}
	// Half end before their deadline.
	for i := 0; i < n; i += 2 {
		e.endHandler(bundles[i].job, nil)
	}
	for i, b := range bundles {
		waitDone(t, b.handler, "handler")
		want := context.DeadlineExceeded
		if i%2 == 0 {
			want = context.Canceled
		}
		if err := b.handler.Err(); err != want {
			t.Fatalf("handler %d: Err = %v, want %v", i, err, want)
		}
		if dl, _ := b.handler.Deadline(); want == context.DeadlineExceeded && time.Now().Before(dl) {
			t.Fatalf("handler %d timed out before its deadline", i)
		}
	}
	for _, b := range bundles {
		e.endHandler(b.job, nil)
	}
	e.deadlines.mu.Lock()
	defer e.deadlines.mu.Unlock()
	if len(e.deadlines.heap) != 0 {
		t.Errorf("heap holds %d", len(e.deadlines.heap))
	}
}

// A handler's context asked for Done only after it ended gets a closed
// channel; one ended while nobody asked allocates none.
func TestHandlerContextDoneLate(t *testing.T) {
	e := newTestExecutor()
	b := newHandlerBundle(t, e, time.Minute)
	e.endHandler(b.job, nil)
	b.job.endJob(nil)
	if b.job.handler.done != nil || b.job.jobCtx.done != nil {
		t.Error("Done channel made though nobody asked for it")
	}
	select {
	case <-b.handler.Done():
	default:
		t.Fatal("Done of an ended context not closed")
	}
	if !errors.Is(b.handler.Err(), context.Canceled) {
		t.Errorf("Err = %v", b.handler.Err())
	}
}

// Without the context package's key, the executor falls back on
// context.WithCancelCause and context.WithTimeout, and the job's and
// handler's contexts still end as they should.
func TestJobContextFallback(t *testing.T) {
	defer func(key any) { cancelCtxKey = key }(cancelCtxKey)
	cancelCtxKey = nil
	e := newTestExecutor()
	j := &ActiveJob{}
	ctx, cancel := e.jobContext(j)
	if cancel == nil {
		t.Fatal("no cancel func from the fallback")
	}
	j.cancel = cancel
	h, cancelTimeout := e.handlerContext(j, ctx, 10*time.Millisecond, time.Now())
	if cancelTimeout == nil {
		t.Fatal("no cancel func for the fallback's timeout")
	}
	waitDone(t, h, "timeout")
	if h.Err() != context.DeadlineExceeded || ctx.Err() != nil || JobFromContext(h) != j {
		t.Fatalf("handler's Err %v, job's Err %v", h.Err(), ctx.Err())
	}
	e.endHandler(j, cancelTimeout)
	j.cancelWith(pgqueuetype.ErrJobLeaseLost)
	if context.Cause(ctx) != pgqueuetype.ErrJobLeaseLost {
		t.Errorf("job's Cause = %v", context.Cause(ctx))
	}
	j.endJob(cancel)
}

// A job's context ended once its result is handed over reports
// context.Canceled, its cause too, as a cancel(nil) would.
func TestJobContextEnd(t *testing.T) {
	e := newTestExecutor()
	b := newHandlerBundle(t, e, -1)
	if _, ok := b.jobCtx.Deadline(); ok {
		t.Error("a job's context has a deadline")
	}
	e.endHandler(b.job, nil)
	b.job.endJob(nil)
	b.job.cancelWith(pgqueuetype.ErrJobLeaseLost) // too late: changes nothing
	for what, ctx := range map[string]context.Context{"job": b.jobCtx, "handler": b.handler} {
		if ctx.Err() != context.Canceled || context.Cause(ctx) != context.Canceled {
			t.Errorf("%s: Err %v, Cause %v", what, ctx.Err(), context.Cause(ctx))
		}
	}
}
