package otelpgqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgqueue/pgqueue"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/pgqueue/pgqueue/otelpgqueue"

// MetaKey is the key of the job's meta under which the enqueuer's trace
// context is stored, as the propagator's fields (traceparent,
// tracestate) in a JSON object.
const MetaKey = "otel"

// ErrObserverSet is returned by Install when the config already has an
// Observer: the client takes one, so combine them yourself with
// Instrumentation.Observer.
var ErrObserverSet = errors.New("otelpgqueue: Config.Observer is already set")

// Config configures an Instrumentation. The zero value uses the global
// providers.
type Config struct {
	// MeterProvider makes the meter. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// TracerProvider makes the tracer; nil records no spans, at no cost
	// per job. Pass otel.GetTracerProvider() for the global one. Which
	// inserts and attempts reach it: see SpanRatio.
	TracerProvider trace.TracerProvider
	// Propagator writes the enqueuer's trace context into the job's meta
	// and reads it back in the run. Default propagation.TraceContext{}:
	// the global propagator is a no-op unless the program set one.
	Propagator propagation.TextMapPropagator
	// SpanRatio is the fraction, 0 to 1, of the inserts and attempts with
	// no sampled parent that are offered to the tracer; the others never
	// call it. otelpgqueue decides before the SDK: an insert under a
	// sampled span, and an attempt whose job was enqueued under one (the
	// request was traced, so its work is), always get a span (the
	// attempt's a child of the enqueue span, and linked to it); any
	// other is chosen by its trace id (of an unsampled parent) or, with
	// none, by a hash of the job's id (the same choice for each of its
	// attempts) or a random number (an insert), with no lock and no
	// allocation. Default 0: only the work of traced requests is traced,
	// and an attempt nobody traces costs nothing. 1 offers every insert
	// and attempt to the tracer, whose sampler decides (what happened
	// before this option); a span offered as a root is still subject to
	// the provider's root sampler.
	SpanRatio float64
}

// Instrumentation records a client's metrics and traces: install it in a
// pgqueue.Config before pgqueue.New.
type Instrumentation struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	// threshold is SpanRatio as a bound on a 63-bit hash: a span with no
	// sampled parent is offered to the tracer when its hash is below it.
	// all is SpanRatio >= 1.
	threshold uint64
	all       bool

	enqueued, completed, failed, retried, discarded metric.Int64Counter
	cancelled, snoozed, released, rescued, refused  metric.Int64Counter
	wait, run                                       metric.Float64Histogram
	results                                         [len(resultKinds)]metric.Int64Counter
	claimSize, writeSize                            metric.Int64Histogram

	// running counts the attempts in the work middleware now, for the
	// pgqueue.jobs.running gauge.
	running atomic.Int64

	// attrs and byJob cache the options of each label set, and what an
	// attempt needs for its queue and kind: building a set (or a span
	// name) on every job would cost more than the measurement. Plain
	// maps: a sync.Map would allocate each key into an interface.
	attrsMu sync.RWMutex
	attrs   map[labels]*opts
	byJobMu sync.RWMutex
	byJob   map[queueKind]*jobOpts
	// last is the queue and kind looked up last: most processes work a
	// few kinds, often long runs of one, and comparing two short strings
	// costs less than hashing them.
	last atomic.Pointer[jobOpts]

	// pending are the attempts not yet recorded (see pend); spare, the
	// recorded buffers kept for reuse.
	pendMu  sync.Mutex
	pending []attemptRecord
	spare   [][]attemptRecord

	mu     sync.Mutex
	queues []*pgqueue.QueueInfo // the leader's last report; nil elsewhere
	// seen holds every queue a report named during this term: QueueList
	// leaves out a queue with no live job, whose gauges must read 0, not
	// vanish.
	seen map[string]bool
}

type labels struct{ queue, kind, k3, v3 string }

type queueKind struct{ queue, kind string }

// opts are the options of one label set, as the slices Add and Record
// take: passed on with ..., a cached slice is not allocated again.
type opts struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

// jobOpts is what an attempt of a queue and kind records with.
type jobOpts struct {
	queue    string
	kind     string
	qk       *opts
	spanName string
	outcome  map[pgqueue.Outcome]*opts
	// results counts the results written since the last collection, by
	// resultIndex: an atomic add per job instead of the SDK's, whose cost
	// was a third of the instrumentation's; flush adds them.
	results [len(resultKinds)]atomic.Int64
}

// resultKinds are the results Observer.ResultRecorded counts, in the order of
// Instrumentation.results.
var resultKinds = [...]pgqueue.Outcome{pgqueue.OutcomeCompleted, pgqueue.OutcomeRetried, pgqueue.OutcomeDiscarded,
	pgqueue.OutcomeCancelled, pgqueue.OutcomeSnoozed, pgqueue.OutcomeReleased}

// resultIndex is r's place in resultKinds; any other result counts as
// released.
func resultIndex(r pgqueue.Outcome) int {
	for i, k := range resultKinds {
		if k == r {
			return i
		}
	}
	return len(resultKinds) - 1
}

// outcomes are the values of the outcome label.
var outcomes = []pgqueue.Outcome{pgqueue.OutcomeCompleted, pgqueue.OutcomeFailed, pgqueue.OutcomeSnoozed,
	pgqueue.OutcomeCancelled, pgqueue.OutcomeReleased, pgqueue.OutcomeLost}

// sizeBuckets suit claims and result batches: 1 up to a few thousand.
var sizeBuckets = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000}

// secondsBuckets span a millisecond to an hour: queue waits and runs.
var secondsBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// New returns an Instrumentation whose instruments are registered with
// cfg's meter provider. cfg may be nil.
func New(cfg *Config) (*Instrumentation, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	if c.Propagator == nil {
		c.Propagator = propagation.TraceContext{}
	}
	meter := c.MeterProvider.Meter(ScopeName)
	var tracer trace.Tracer
	if c.TracerProvider != nil {
		tracer = c.TracerProvider.Tracer(ScopeName)
	}
	in := &Instrumentation{propagator: c.Propagator,
		tracer: tracer, attrs: map[labels]*opts{}, byJob: map[queueKind]*jobOpts{}}
	if c.SpanRatio >= 1 {
		in.all = true
	} else if c.SpanRatio > 0 {
		in.threshold = uint64(c.SpanRatio * (1 << 63))
	}
	var errs []error
	counter := func(name, desc string) metric.Int64Counter {
		m, err := meter.Int64Counter(name, metric.WithUnit("{job}"), metric.WithDescription(desc))
		errs = append(errs, err)
		return m
	}
	in.enqueued = counter("pgqueue.jobs.enqueued", "Jobs inserted by this process (in a transaction: written, maybe not committed), by queue and kind.")
	in.completed = counter("pgqueue.jobs.completed", "Jobs this process completed, by queue and kind.")
	in.failed = counter("pgqueue.jobs.failed", "Attempts this process ran that failed (an error or a panic), by queue and kind.")
	in.retried = counter("pgqueue.jobs.retried", "Failed attempts whose job was scheduled to run again, by queue and kind.")
	in.discarded = counter("pgqueue.jobs.discarded", "Jobs this process discarded (attempts used up, an error handler's decision, an unknown kind), by queue and kind.")
	in.cancelled = counter("pgqueue.jobs.cancelled", "Jobs this process ended cancelled, by queue and kind.")
	in.snoozed = counter("pgqueue.jobs.snoozed", "Attempts that snoozed their job, by queue and kind.")
	in.released = counter("pgqueue.jobs.released", "Jobs handed back unrun or cut short by Stop, by queue and kind.")
	in.rescued = counter("pgqueue.jobs.rescued", "Running jobs whose lease expired, rescued by this process as the maintenance leader, by queue, kind and state after the rescue.")
	in.refused = counter("pgqueue.writes.refused", "Writes about a job refused by its fence (the job was taken over), by queue, kind and write (result, heartbeat).")
	hist := func(name, desc string) metric.Float64Histogram {
		m, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(secondsBuckets...))
		errs = append(errs, err)
		return m
	}
	in.wait = hist("pgqueue.job.wait", "Time from when a job became runnable (its run_at) to the start of its attempt, by the database clock, by queue and kind.")
	in.run = hist("pgqueue.job.duration", "Run time of each attempt (handler and work middleware inside this one), by queue, kind and outcome.")
	size := func(name, desc string) metric.Int64Histogram {
		m, err := meter.Int64Histogram(name, metric.WithUnit("{job}"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(sizeBuckets...))
		errs = append(errs, err)
		return m
	}
	in.results = [...]metric.Int64Counter{in.completed, in.retried, in.discarded, in.cancelled, in.snoozed, in.released}
	in.claimSize = size("pgqueue.claim.size", "Jobs taken by each claim that took any, by queue.")
	in.writeSize = size("pgqueue.complete.size", "Results written by each batch statement.")

	jobs, err := meter.Int64ObservableGauge("pgqueue.queue.jobs", metric.WithUnit("{job}"),
		metric.WithDescription("Unfinished jobs per queue and state (blocked, scheduled, available, running), reported by the maintenance leader only."))
	errs = append(errs, err)
	age, err := meter.Float64ObservableGauge("pgqueue.queue.oldest_available_age", metric.WithUnit("s"),
		metric.WithDescription("How long the oldest available job of each queue has waited; 0 when none waits. Reported by the maintenance leader only."))
	errs = append(errs, err)
	paused, err := meter.Int64ObservableGauge("pgqueue.queue.paused",
		metric.WithDescription("1 when the queue is paused. Reported by the maintenance leader only."))
	errs = append(errs, err)
	_, err = meter.Int64ObservableUpDownCounter("pgqueue.jobs.running", metric.WithUnit("{job}"),
		metric.WithDescription("Jobs this process is running now (in its work middleware)."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(in.running.Load())
			return nil
		}))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		// Callbacks run before the SDK reads the synchronous instruments:
		// what pends is in this collection.
		in.flush()
		in.mu.Lock()
		qs := in.queues
		var gone []*pgqueue.QueueInfo
		if qs != nil {
			listed := make(map[string]bool, len(qs))
			for _, q := range qs {
				listed[q.Name] = true
			}
			for name := range in.seen {
				if !listed[name] {
					gone = append(gone, &pgqueue.QueueInfo{Name: name})
				}
			}
		}
		in.mu.Unlock()
		for _, q := range slices.Concat(qs, gone) {
			queue := attribute.String("queue", q.Name)
			o.ObserveInt64(jobs, q.Blocked, metric.WithAttributes(queue, attribute.String("state", "blocked")))
			o.ObserveInt64(jobs, q.Scheduled, metric.WithAttributes(queue, attribute.String("state", "scheduled")))
			o.ObserveInt64(jobs, q.Available, metric.WithAttributes(queue, attribute.String("state", "available")))
			o.ObserveInt64(jobs, q.Running, metric.WithAttributes(queue, attribute.String("state", "running")))
			o.ObserveFloat64(age, q.OldestAvailableAge.Seconds(), metric.WithAttributes(queue))
			var p int64
			if q.Paused {
				p = 1
			}
			o.ObserveInt64(paused, p, metric.WithAttributes(queue))
		}
		return nil
	}, jobs, age, paused)
	if err != nil {
		return nil, err
	}
	return in, nil
}

// Install adds the instrumentation to cfg: its insert and work middleware
// first (outermost, so the spans and the run time cover the others) and
// its Observer. It returns ErrObserverSet when cfg has an Observer.
func (in *Instrumentation) Install(cfg *pgqueue.Config) error {
	if cfg.Observer != nil {
		return ErrObserverSet
	}
	cfg.EnqueueMiddleware = append([]pgqueue.EnqueueMiddleware{in.EnqueueMiddleware()}, cfg.EnqueueMiddleware...)
	cfg.WorkMiddleware = append([]pgqueue.WorkMiddleware{in.WorkMiddleware()}, cfg.WorkMiddleware...)
	cfg.Observer = in.Observer()
	return nil
}

// opt returns the cached options of a label set.
func (in *Instrumentation) opt(l labels) *opts {
	in.attrsMu.RLock()
	o, ok := in.attrs[l]
	in.attrsMu.RUnlock()
	if ok {
		return o
	}
	kv := make([]attribute.KeyValue, 0, 3)
	if l.queue != "" {
		kv = append(kv, attribute.String("queue", l.queue))
	}
	if l.kind != "" {
		kv = append(kv, attribute.String("kind", l.kind))
	}
	if l.k3 != "" {
		kv = append(kv, attribute.String(l.k3, l.v3))
	}
	set := metric.WithAttributeSet(attribute.NewSet(kv...))
	o = &opts{add: []metric.AddOption{set}, rec: []metric.RecordOption{set}}
	in.attrsMu.Lock()
	in.attrs[l] = o
	in.attrsMu.Unlock()
	return o
}

// jobOpts returns the cached options of an attempt of queue and kind.
func (in *Instrumentation) jobOpts(queue, kind string) *jobOpts {
	if o := in.last.Load(); o != nil && o.queue == queue && o.kind == kind {
		return o
	}
	return in.lookupJobOpts(queue, kind)
}

// lookupJobOpts is jobOpts past the last one. Not inlined, and its
// building in a function of its own: a job's goroutine runs the work
// middleware on a stack the garbage collector keeps shrinking, and every
// byte of frame on the way to the handler is a chance to grow it again.
//
//go:noinline
func (in *Instrumentation) lookupJobOpts(queue, kind string) *jobOpts {
	key := queueKind{queue, kind}
	in.byJobMu.RLock()
	o := in.byJob[key]
	in.byJobMu.RUnlock()
	if o == nil {
		o = in.newJobOpts(key)
	}
	in.last.Store(o)
	return o
}

//go:noinline
func (in *Instrumentation) newJobOpts(key queueKind) *jobOpts {
	o := &jobOpts{queue: key.queue, kind: key.kind, qk: in.opt(labels{queue: key.queue, kind: key.kind}),
		spanName: "pgqueue.work " + key.kind, outcome: make(map[pgqueue.Outcome]*opts, len(outcomes))}
	for _, oc := range outcomes {
		o.outcome[oc] = in.opt(labels{queue: key.queue, kind: key.kind, k3: "outcome", v3: string(oc)})
	}
	in.byJobMu.Lock()
	defer in.byJobMu.Unlock()
	if prev := in.byJob[key]; prev != nil { // built meanwhile by another attempt
		return prev
	}
	in.byJob[key] = o
	return o
}

// producer is the start option of every insert's span.
var producer = trace.WithSpanKind(trace.SpanKindProducer)

// EnqueueMiddleware returns the middleware that counts inserted jobs, and
// wraps each insert under a sampled span (or chosen at SpanRatio) in a
// producer span whose trace context, when sampled, it stores in every
// job's meta under MetaKey.
func (in *Instrumentation) EnqueueMiddleware() pgqueue.EnqueueMiddleware {
	return pgqueue.EnqueueMiddlewareFunc(in.insert)
}

func (in *Instrumentation) insert(ctx context.Context, jobs []*pgqueue.EnqueueParams, next func(context.Context) (*pgqueue.EnqueuedJobs, error)) error {
	if in.tracer == nil || !in.offerInsert(ctx) {
		res, err := next(ctx)
		if err == nil {
			in.countEnqueued(ctx, jobs, res)
		}
		return err
	}
	ctx, span := in.tracer.Start(ctx, "pgqueue.enqueue", producer)
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(attribute.String("messaging.system", "pgqueue"), attribute.Int("messaging.batch.message_count", len(jobs)))
		if len(jobs) > 0 {
			span.SetAttributes(attribute.String("messaging.destination.name", jobs[0].Queue), attribute.String("pgqueue.kind", jobs[0].Kind))
		}
	}
	// Stored only when sampled: an unsampled context would cost every
	// job's meta its bytes, and every attempt a parse, to link to a span
	// that was never exported.
	if span.SpanContext().IsSampled() {
		carrier := propagation.MapCarrier{}
		in.propagator.Inject(ctx, carrier)
		if len(carrier) > 0 {
			for _, j := range jobs {
				if j.Meta == nil {
					j.Meta = map[string]any{}
				}
				j.Meta[MetaKey] = map[string]string(carrier)
			}
		}
	}
	res, err := next(ctx)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return err
	}
	if len(res.Rows) == 1 {
		span.SetAttributes(attribute.Int64("pgqueue.job.id", res.Rows[0].ID))
	}
	in.countEnqueued(ctx, jobs, res)
	if n := len(res.Duplicates); n > 0 {
		span.SetAttributes(attribute.Int("pgqueue.duplicates", n))
	}
	return nil
}

// countEnqueued counts the jobs an insert wrote: all but the duplicates.
func (in *Instrumentation) countEnqueued(ctx context.Context, jobs []*pgqueue.EnqueueParams, res *pgqueue.EnqueuedJobs) {
	dup := res.Duplicates
	for i, j := range jobs {
		if len(dup) > 0 && dup[0] == i {
			dup = dup[1:]
			continue
		}
		in.enqueued.Add(ctx, 1, in.opt(labels{queue: j.Queue, kind: j.Kind}).add...)
	}
}

// consumer is the start option of every attempt's span.
var consumer = trace.WithSpanKind(trace.SpanKindConsumer)

// WorkMiddleware returns the middleware that records each attempt's queue
// wait, run time and failure, and runs an attempt whose job was enqueued
// under a sampled span (or chosen at SpanRatio) in a consumer span, a
// child of the span that enqueued the job and linked to it.
func (in *Instrumentation) WorkMiddleware() pgqueue.WorkMiddleware {
	return pgqueue.WorkMiddlewareFunc(in.work)
}

// work is the work middleware. It measures the attempt and queues what
// to record (see pend); its frame, and what it calls before next, are
// kept small: the executor's goroutine runs jobs on a stack the garbage
// collector shrinks at each cycle, and a middleware that takes the
// handler, or the metrics SDK's recording, past it makes the runtime copy
// the stack again for the next job. A burn-down measured that copy at
// more than the metrics themselves.
func (in *Instrumentation) work(ctx context.Context, job *pgqueue.JobRow, next func(context.Context) error) error {
	in.running.Add(1)
	// Deferred: a panic in an inner middleware passes through here.
	defer in.running.Add(-1)
	if in.tracer != nil {
		if parent, ok := in.offerAttempt(job); ok {
			return in.workTraced(ctx, parent, job, next)
		}
	}
	start := time.Now()
	err := next(ctx)
	in.pend(in.attempt(ctx, job, start, err))
	return err
}

// attemptRecord is what an attempt records: its queue wait (negative for
// none), run time and outcome.
type attemptRecord struct {
	o          *jobOpts
	outcome    pgqueue.Outcome
	wait, took float64
}

// flushAt is how many attempts pend before the one that fills the
// buffer records them all.
const flushAt = 256

// attempt measures an attempt that started at start and returned err.
//
//go:noinline
func (in *Instrumentation) attempt(ctx context.Context, job *pgqueue.JobRow, start time.Time, err error) attemptRecord {
	r := attemptRecord{took: time.Since(start).Seconds(), wait: -1,
		o: in.jobOpts(job.Queue, job.Kind), outcome: pgqueue.OutcomeOf(ctx, err)}
	if !job.AttemptedAt.IsZero() && !job.RunAt.IsZero() {
		// Both by the database clock: no skew with this host.
		r.wait = max(job.AttemptedAt.Sub(job.RunAt), 0).Seconds()
	}
	return r
}

// pend queues an attempt's record; the attempt that fills the buffer
// records the buffer, and every collection records what is pending
// first (see New), so a reader never misses an attempt that ended
// before it collected. Recorded in batches, the metrics SDK's deep calls
// grow one goroutine's stack per flushAt jobs instead of nearly every
// executor's at every garbage collection (see work).
//
//go:noinline
func (in *Instrumentation) pend(r attemptRecord) {
	in.pendMu.Lock()
	if in.pending == nil {
		in.pending = in.newBuffer()
	}
	in.pending = append(in.pending, r)
	var full []attemptRecord
	if len(in.pending) >= flushAt {
		full, in.pending = in.pending, in.newBuffer()
	}
	in.pendMu.Unlock()
	if full != nil {
		in.recordAll(full)
	}
}

// newBuffer returns an empty buffer of pending attempts, a recorded one
// when there is one; pendMu is held.
func (in *Instrumentation) newBuffer() []attemptRecord {
	if n := len(in.spare); n > 0 {
		b := in.spare[n-1]
		in.spare = in.spare[:n-1]
		return b
	}
	return make([]attemptRecord, 0, flushAt)
}

// flush records every pending attempt, and adds the results counted
// since the last flush.
func (in *Instrumentation) flush() {
	in.pendMu.Lock()
	b := in.pending
	in.pending = nil
	in.pendMu.Unlock()
	if len(b) > 0 {
		in.recordAll(b)
	}
	ctx := context.Background()
	in.byJobMu.RLock()
	defer in.byJobMu.RUnlock()
	for _, o := range in.byJob {
		for i := range o.results {
			if n := o.results[i].Swap(0); n > 0 {
				in.results[i].Add(ctx, n, o.qk.add...)
			}
		}
	}
}

// recordAll records the attempts of b and keeps b for reuse.
func (in *Instrumentation) recordAll(b []attemptRecord) {
	ctx := context.Background()
	for i := range b {
		in.record(ctx, &b[i])
	}
	clear(b) // drop the pointers
	in.pendMu.Lock()
	if len(in.spare) < 4 {
		in.spare = append(in.spare, b[:0])
	}
	in.pendMu.Unlock()
}

// record records an attempt's queue wait, run time and failure; ctx
// carries the attempt's span when it is recorded at once, for the SDK's
// exemplars.
func (in *Instrumentation) record(ctx context.Context, r *attemptRecord) {
	o := r.o
	if r.wait >= 0 {
		in.wait.Record(ctx, r.wait, o.qk.rec...)
	}
	oc, ok := o.outcome[r.outcome]
	if !ok {
		oc = in.opt(labels{queue: o.queue, kind: o.kind, k3: "outcome", v3: string(r.outcome)})
	}
	in.run.Record(ctx, r.took, oc.rec...)
	if r.outcome == pgqueue.OutcomeFailed {
		in.failed.Add(ctx, 1, o.qk.add...)
	}
}

// workTraced is work with a tracer: the attempt runs in a consumer span.
// A sampled attempt records at once, with the span's context, so that the
// SDK may keep exemplars that point at the span; the others pend.
//
// parent, when valid, is the sampled enqueuer's span: the attempt's span
// is its child, in the request's trace.
//
//go:noinline
func (in *Instrumentation) workTraced(ctx context.Context, parent trace.SpanContext, job *pgqueue.JobRow, next func(context.Context) error) error {
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	ctx, span := in.tracer.Start(ctx, in.jobOpts(job.Queue, job.Kind).spanName, consumer)
	recording := span.IsRecording()
	if recording {
		// Built only for a span that keeps them: with tracing off (a no-op
		// provider, or not sampled) they would be most of the cost per job.
		in.describeAttempt(span, parent, job)
	}
	start := time.Now()
	err := next(ctx)
	r := in.attempt(ctx, job, start, err)
	if span.SpanContext().IsSampled() {
		in.record(ctx, &r)
	} else {
		in.pend(r)
	}
	if recording {
		endAttempt(span, r.outcome, err)
	}
	span.End()
	return err
}

// describeAttempt sets the attributes of an attempt's recording span, and
// its link to the enqueuer's span (parent, when offerAttempt read it).
//
//go:noinline
func (in *Instrumentation) describeAttempt(span trace.Span, parent trace.SpanContext, job *pgqueue.JobRow) {
	span.SetAttributes(
		attribute.String("messaging.system", "pgqueue"),
		attribute.String("messaging.destination.name", job.Queue),
		attribute.String("messaging.message.id", strconv.FormatInt(job.ID, 10)),
		attribute.String("pgqueue.kind", job.Kind),
		attribute.Int("pgqueue.attempt", job.Attempt),
	)
	if parent.IsValid() {
		span.AddLink(trace.Link{SpanContext: parent})
	} else if link, ok := in.enqueuer(job.Meta); ok {
		span.AddLink(trace.Link{SpanContext: link})
	}
}

// endAttempt sets the outcome on an attempt's recording span.
//
//go:noinline
func endAttempt(span trace.Span, outcome pgqueue.Outcome, err error) {
	if outcome == pgqueue.OutcomeFailed {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.SetAttributes(attribute.String("pgqueue.outcome", string(outcome)))
}

// enqueuer reads the trace context the enqueue middleware stored in meta.
func (in *Instrumentation) enqueuer(meta []byte) (trace.SpanContext, bool) {
	if !bytes.Contains(meta, []byte(`"`+MetaKey+`"`)) {
		return trace.SpanContext{}, false
	}
	var m struct {
		Carrier propagation.MapCarrier `json:"otel"` // MetaKey
	}
	if json.Unmarshal(meta, &m) != nil || len(m.Carrier) == 0 {
		return trace.SpanContext{}, false
	}
	// From an empty context: from ctx, a carrier the propagator cannot
	// read would give back the attempt's own span.
	sc := trace.SpanContextFromContext(in.propagator.Extract(context.Background(), m.Carrier))
	return sc, sc.IsValid()
}

// Observer returns the pgqueue.Observer that counts results, rescues and
// refused writes, records claim and batch sizes, and keeps the leader's
// queue counts for the gauges. Install sets it; set it yourself to
// combine it with another.
func (in *Instrumentation) Observer() *pgqueue.Observer {
	ctx := context.Background()
	return &pgqueue.Observer{
		Claimed: func(queue string, n int) {
			in.claimSize.Record(ctx, int64(n), in.opt(labels{queue: queue}).rec...)
		},
		BatchWritten: func(n int) { in.writeSize.Record(ctx, int64(n)) },
		ResultRecorded: func(job *pgqueue.JobRow, r pgqueue.Outcome) {
			in.jobOpts(job.Queue, job.Kind).results[resultIndex(r)].Add(1)
		},
		WriteRefused: func(job *pgqueue.JobRow, write pgqueue.FencedWrite) {
			in.refused.Add(ctx, 1, in.opt(labels{queue: job.Queue, kind: job.Kind, k3: "write", v3: string(write)}).add...)
		},
		Rescued: func(j pgqueue.RescuedJob) {
			in.rescued.Add(ctx, 1, in.opt(labels{queue: j.Queue, kind: j.Kind, k3: "state", v3: string(j.State)}).add...)
		},
		Queues: func(qs []*pgqueue.QueueInfo) {
			in.mu.Lock()
			defer in.mu.Unlock()
			in.queues = qs
			if qs == nil { // another client reports now
				in.seen = nil
				return
			}
			if in.seen == nil {
				in.seen = map[string]bool{}
			}
			for _, q := range qs {
				in.seen[q.Name] = true
			}
		},
	}
}
