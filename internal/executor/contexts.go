package executor

import (
	"context"
	"errors"
	"sync"
	"time"
)

// jobContext is a running job's context, or its handler's, kept in the
// job's ActiveJob. A job's context (ActiveJob.jobCtx) behaves as
// context.WithCancelCause(values) would: ActiveJob.cancelWith ends it with
// a cause (ErrJobCancelled, ErrJobLeaseLost, ErrStopping), Execute once the
// job's result is handed over. Its handler's (ActiveJob.handler) behaves as
// context.WithTimeout(jobCtx, timeout) would: it ends with the job's
// context (cancelWith ends both), when its deadline passes (the executor's
// deadline heap, one timer for every job of a client), or when the handler
// returned. Err, Deadline, context.Cause and the contexts derived from
// them answer as the standard library's would, without their cost per
// job: two contexts, a cancel func, a timer and a child map entry. The
// Done channel is made only when asked for.
type jobContext struct {
	// parent is where values come from: for a job's context, a jobValueCtx
	// carrying the job; for a handler's, the job's context.
	parent   context.Context
	deadline time.Time
	// at is deadline on the heap's clock; index is the position in the
	// heap, -1 when not in it. Both are the heap's, under its lock.
	at    int64
	index int

	mu   sync.Mutex
	done chan struct{} // made by Done, closed when err is set
	err  error
	// cause is what context.Cause reports once err is set; nil for err
	// itself, or, with fromParent, the parent's cause.
	cause      error
	fromParent bool
	// causeCtx is a cancelled context.WithCancelCause holding cause, made
	// the first time context.Cause asks (see Value).
	causeCtx context.Context
	afters   []*afterFunc
}

// afterFunc is a function registered with AfterFunc: a context derived
// from the handler's, whose cancellation it passes on.
type afterFunc struct{ f func() }

// cancelCtxKey is the key under which context.Cause (and the context
// package's children bookkeeping) look up a context's nearest cancelCtx;
// nil when the context package does not work as causeKeySpy expects, and
// the executor then falls back on context.WithTimeout.
var cancelCtxKey = causeKeySpy()

func init() {
	if cancelCtxKey != nil && !jobContextWorks() {
		cancelCtxKey = nil
	}
}

// jobContextWorks checks, once, that context.Cause reports a jobContext's
// cause, and a context derived from it ends with it.
func jobContextWorks() bool {
	cause := errors.New("probe")
	c := &jobContext{parent: context.Background(), index: -1}
	child, cancel := context.WithCancel(c)
	defer cancel()
	if context.Cause(c) != nil || child.Err() != nil {
		return false
	}
	c.end(context.Canceled, cause, false)
	return c.Err() == context.Canceled && context.Cause(c) == cause &&
		child.Err() == context.Canceled && context.Cause(child) == cause
}

// causeKeySpy returns the key context.Cause asks a context's Value for,
// checking that a context.WithCancelCause answers it with itself (so its
// cause is what context.Cause reports). jobContext answers it with such a
// context holding its cause.
func causeKeySpy() any {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	s := &keySpy{Context: ended} // context.Cause asks only an ended context
	_ = context.Cause(s)
	if s.key == nil {
		return nil
	}
	ctx, cancelCause := context.WithCancelCause(context.Background())
	defer cancelCause(nil)
	if ctx.Value(s.key) == nil || context.Background().Value(s.key) != nil {
		return nil
	}
	return s.key
}

type keySpy struct {
	context.Context
	key any
}

func (s *keySpy) Value(key any) any {
	s.key = key
	return nil
}

// Deadline is the handler's timeout, if any, else the parent's.
func (c *jobContext) Deadline() (time.Time, bool) {
	if !c.deadline.IsZero() {
		return c.deadline, true
	}
	return c.parent.Deadline()
}

// Done returns a channel closed when the context ends.
func (c *jobContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		}
	}
	return c.done
}

// Err is nil while the context runs, then context.Canceled or
// context.DeadlineExceeded.
func (c *jobContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Value returns the parent's values. The context package's own key is
// asked by context.Cause, of an ended context only: the answer is a
// cancelled context holding the cause (made then, once), the parent's
// answer when the context ended with its parent, or nil when the cause is
// Err. (It is also asked when a context is derived from this one, which
// then registers with AfterFunc: nil while the context runs.)
func (c *jobContext) Value(key any) any {
	if key != cancelCtxKey {
		return c.parent.Value(key)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.err == nil:
		return nil
	case c.fromParent:
		return c.parent.Value(key)
	case c.cause == nil:
		return nil
	}
	if c.causeCtx == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(c.cause)
		c.causeCtx = ctx
	}
	return c.causeCtx.Value(key)
}

// AfterFunc arranges for f to run once the context ends: the context
// package calls it to tie a context derived from this one to it.
func (c *jobContext) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	a := &afterFunc{f: f}
	c.afters = append(c.afters, a)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, b := range c.afters {
			if b == a {
				c.afters = append(c.afters[:i], c.afters[i+1:]...)
				return true
			}
		}
		return false
	}
}

// end ends the context with err and cause (nil: err itself; with
// fromParent, the parent's), unless it has ended already, and runs what
// AfterFunc registered.
func (c *jobContext) end(err, cause error, fromParent bool) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err, c.cause, c.fromParent = err, cause, fromParent
	if c.done != nil {
		close(c.done)
	}
	afters := c.afters
	c.afters = nil
	c.mu.Unlock()
	for _, a := range afters {
		a.f()
	}
}

// deadlines times out the handlers of an executor's jobs with one timer,
// a min-heap of their deadlines.
type deadlines struct {
	epoch time.Time
	mu    sync.Mutex
	heap  []*jobContext
	timer *time.Timer
	// armed: timer is set to fire at armedAt.
	armed   bool
	armedAt int64
}

func newDeadlines() *deadlines {
	d := &deadlines{epoch: time.Now()}
	d.timer = time.AfterFunc(time.Hour, d.fire)
	d.timer.Stop()
	return d
}

// add puts c, whose deadline is set, on the heap.
func (d *deadlines) add(c *jobContext) {
	at := int64(c.deadline.Sub(d.epoch))
	d.mu.Lock()
	c.at, c.index = at, len(d.heap)
	d.heap = append(d.heap, c)
	d.up(c.index)
	if !d.armed || at < d.armedAt {
		d.arm(at)
	}
	d.mu.Unlock()
}

// remove takes c off the heap, if it is on it.
func (d *deadlines) remove(c *jobContext) {
	d.mu.Lock()
	if i := c.index; i >= 0 && i < len(d.heap) && d.heap[i] == c {
		d.removeAt(i)
	}
	// The timer stays set when the heap empties: stopping it, and setting
	// it again for the next job, would cost two timer updates per job
	// when jobs take microseconds. It fires once for nothing.
	d.mu.Unlock()
}

// fire times out the handlers whose deadline passed and sets the timer
// for the next.
func (d *deadlines) fire() {
	now := int64(time.Since(d.epoch))
	var due []*jobContext
	d.mu.Lock()
	d.armed = false
	for len(d.heap) > 0 && d.heap[0].at <= now {
		due = append(due, d.heap[0])
		d.removeAt(0)
	}
	if len(d.heap) > 0 {
		d.arm(d.heap[0].at)
	}
	d.mu.Unlock()
	for _, c := range due {
		c.end(context.DeadlineExceeded, nil, false)
	}
}

// arm sets the timer for at; under mu.
func (d *deadlines) arm(at int64) {
	d.timer.Reset(max(time.Duration(at-int64(time.Since(d.epoch))), 0))
	d.armed, d.armedAt = true, at
}

func (d *deadlines) removeAt(i int) {
	last := len(d.heap) - 1
	c := d.heap[i]
	if i != last {
		d.swap(i, last)
	}
	d.heap[last] = nil
	d.heap = d.heap[:last]
	c.index = -1
	if i != last {
		d.down(i)
		d.up(i)
	}
}

func (d *deadlines) swap(i, j int) {
	d.heap[i], d.heap[j] = d.heap[j], d.heap[i]
	d.heap[i].index, d.heap[j].index = i, j
}

func (d *deadlines) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if d.heap[p].at <= d.heap[i].at {
			return
		}
		d.swap(i, p)
		i = p
	}
}

func (d *deadlines) down(i int) {
	n := len(d.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && d.heap[r].at < d.heap[l].at {
			m = r
		}
		if d.heap[i].at <= d.heap[m].at {
			return
		}
		d.swap(i, m)
		i = m
	}
}
