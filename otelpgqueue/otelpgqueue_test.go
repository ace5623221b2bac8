package otelpgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/otelpgqueue"
	"github.com/pgqueue/pgqueue/pgqueuetest"
)

func TestMain(m *testing.M) {
	code := pgqueuetest.Main(m, nil)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

type taskArgs struct {
	Mode string `json:"mode"`
}

func (taskArgs) Kind() string { return "task" }

func taskWorkers(t *testing.T) *pgqueue.Workers {
	workers := pgqueue.NewWorkers()
	err := pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[taskArgs]) error {
		switch job.Args.Mode {
		case "fail":
			return errors.New("boom")
		case "cancel":
			return pgqueue.JobCancel(errors.New("not wanted"))
		case "snooze":
			return pgqueue.JobSnooze(time.Hour)
		case "untraced":
			return nil
		}
		// The handler's own spans are children of the attempt's.
		if !trace.SpanContextFromContext(ctx).IsValid() {
			return errors.New("no span in the handler's context")
		}
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return workers
}

// metrics reads every metric the reader has, by name.
func metrics(t *testing.T, r sdkmetric.Reader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// sum adds the counter's points whose attributes include want.
func sum(data metricdata.Aggregation, want ...attribute.KeyValue) int64 {
	s, _ := data.(metricdata.Sum[int64])
	var n int64
	for _, p := range s.DataPoints {
		if has(p.Attributes, want) {
			n += p.Value
		}
	}
	return n
}

func has(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// histCount counts the histogram's observations (and their sum) whose
// attributes include want.
func histCount[N int64 | float64](data metricdata.Aggregation, want ...attribute.KeyValue) (count uint64, total N) {
	h, _ := data.(metricdata.Histogram[N])
	for _, p := range h.DataPoints {
		if has(p.Attributes, want) {
			count += p.Count
			total += p.Sum
		}
	}
	return count, total
}

func gauge(data metricdata.Aggregation, want ...attribute.KeyValue) (int64, bool) {
	g, _ := data.(metricdata.Gauge[int64])
	for _, p := range g.DataPoints {
		if has(p.Attributes, want) {
			return p.Value, true
		}
	}
	return 0, false
}

// await collects until cond holds for the metrics.
func await(t *testing.T, r sdkmetric.Reader, what string, cond func(m map[string]metricdata.Aggregation) bool) map[string]metricdata.Aggregation {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := metrics(t, r)
		if cond(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never showed %s: %v", what, m)
		}
		time.Sleep(20 * time.Millisecond) // polling a reader: no event to wait on
	}
}

func TestMetricsAndTraces(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "the metrics and traces of jobs worked through a client")
	ctx := t.Context()
	pool := pgqueuetest.NewPool(t)

	reader, mp, spans, tp := newProviders(t, sdktrace.ParentBased(sdktrace.AlwaysSample())) // the SDK's default

	inst, err := otelpgqueue.New(&otelpgqueue.Config{MeterProvider: mp, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &pgqueue.Config{
		Workers:     taskWorkers(t),
		Queues:      map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 4}},
		RetryPolicy: pgqueue.RetryPolicyFunc(func(int, error) time.Duration { return 0 }),
	}
	if err := inst.Install(cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Observer.QueuesInterval = 50 * time.Millisecond
	if err := inst.Install(cfg); !errors.Is(err, otelpgqueue.ErrObserverSet) {
		t.Fatalf("second Install: %v, want ErrObserverSet", err)
	}
	client, err := pgqueue.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}

	// The request that enqueues, in a span of its own.
	reqCtx, req := tp.Tracer("test").Start(ctx, "request")
	for _, mode := range []string{"ok", "ok", "ok", "fail", "cancel", "snooze"} {
		opts := &pgqueue.EnqueueOpts{}
		if mode == "fail" {
			opts.MaxAttempts = 2
		}
		if _, err := client.Enqueue(reqCtx, taskArgs{Mode: mode}, opts); err != nil {
			t.Fatal(err)
		}
	}
	// A unique duplicate is not counted; a job due later is gauged.
	unique := &pgqueue.EnqueueOpts{Queue: "later", RunAt: time.Now().Add(time.Hour), Unique: &pgqueue.UniqueOpts{ByArgs: true}}
	for range 2 {
		if _, err := client.Enqueue(reqCtx, taskArgs{Mode: "ok"}, unique); err != nil {
			t.Fatal(err)
		}
	}
	req.End()

	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := client.Stop(context.WithoutCancel(ctx)); err != nil {
			t.Error(err)
		}
	}()

	task := attribute.String("kind", "task")
	def := attribute.String("queue", "default")
	m := await(t, reader, "every result and the gauges", func(m map[string]metricdata.Aggregation) bool {
		n, _ := histCount[int64](m["pgqueue.complete.size"])
		later, _ := gauge(m["pgqueue.queue.jobs"], attribute.String("queue", "later"), attribute.String("state", "scheduled"))
		return n > 0 && sum(m["pgqueue.jobs.completed"])+sum(m["pgqueue.jobs.retried"])+sum(m["pgqueue.jobs.discarded"])+
			sum(m["pgqueue.jobs.cancelled"])+sum(m["pgqueue.jobs.snoozed"]) == 7 && later == 1
	})

	for name, want := range map[string]int64{
		"pgqueue.jobs.completed": 3, "pgqueue.jobs.failed": 2, "pgqueue.jobs.retried": 1, "pgqueue.jobs.discarded": 1,
		"pgqueue.jobs.cancelled": 1, "pgqueue.jobs.snoozed": 1,
	} {
		if got := sum(m[name], task, def); got != want {
			t.Errorf("%s{queue=default,kind=task} = %d, want %d", name, got, want)
		}
	}
	if got := sum(m["pgqueue.jobs.enqueued"], task, def); got != 6 {
		t.Errorf("enqueued in default: %d, want 6", got)
	}
	if got := sum(m["pgqueue.jobs.enqueued"], task, attribute.String("queue", "later")); got != 1 {
		t.Errorf("enqueued in later: %d, want 1 (the duplicate is not)", got)
	}
	if n, _ := histCount[float64](m["pgqueue.job.wait"], task, def); n != 7 {
		t.Errorf("queue waits recorded: %d, want 7 attempts", n)
	}
	if n, _ := histCount[float64](m["pgqueue.job.duration"], task, attribute.String("outcome", "completed")); n != 3 {
		t.Errorf("completed run times: %d, want 3", n)
	}
	if n, _ := histCount[float64](m["pgqueue.job.duration"], task, attribute.String("outcome", "failed")); n != 2 {
		t.Errorf("failed run times: %d, want 2", n)
	}
	if _, claimed := histCount[int64](m["pgqueue.claim.size"], def); claimed != 7 {
		t.Errorf("claims took %d jobs, want 7", claimed)
	}
	if _, written := histCount[int64](m["pgqueue.complete.size"]); written != 7 {
		t.Errorf("batches wrote %d results, want 7", written)
	}
	if v, ok := gauge(m["pgqueue.queue.paused"], attribute.String("queue", "later")); !ok || v != 0 {
		t.Errorf("paused gauge of later: %d, %t", v, ok)
	}

	// Traces: one producer span per insert, in the request's trace, and
	// one consumer span per attempt linked to it.
	enqueues := map[trace.SpanID]bool{}
	var works int
	for _, s := range spans.GetSpans() {
		switch {
		case s.Name == "pgqueue.enqueue":
			if s.SpanKind != trace.SpanKindProducer || s.Parent.SpanID() != req.SpanContext().SpanID() {
				t.Errorf("enqueue span %v: kind %v, parent %v", s.SpanContext.SpanID(), s.SpanKind, s.Parent.SpanID())
			}
			enqueues[s.SpanContext.SpanID()] = true
		}
	}
	for _, s := range spans.GetSpans() {
		if s.Name != "pgqueue.work task" {
			continue
		}
		works++
		if s.SpanKind != trace.SpanKindConsumer || len(s.Links) != 1 ||
			s.Links[0].SpanContext.TraceID() != req.SpanContext().TraceID() || !enqueues[s.Links[0].SpanContext.SpanID()] {
			t.Errorf("work span %s: kind %v, links %+v", s.SpanContext.SpanID(), s.SpanKind, s.Links)
		}
	}
	if len(enqueues) != 8 || works != 7 {
		t.Errorf("%d enqueue spans, %d work spans; want 8 and 7", len(enqueues), works)
	}
}

func TestRescuedAndRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgqueuetest.NewPool(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	inst, err := otelpgqueue.New(&otelpgqueue.Config{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}

	// A job claimed by a client that died: WorkJob's claim is a real
	// claim, and a handler that outlives the lease never reports.
	dead, err := pgqueue.New(pool, &pgqueue.Config{ID: "dead", JobLease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	stuck, err := dead.Enqueue(ctx, taskArgs{}, &pgqueue.EnqueueOpts{Queue: "stuck"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE pgqueue.jobs SET state = 'running', attempt = 1, fence = nextval('pgqueue.fence_seq'),
		lease_until = now() - interval '1 second', worker_id = 'dead', attempted_at = now() WHERE id = $1`, stuck.ID); err != nil {
		t.Fatal(err)
	}

	started, release := make(chan int64), make(chan struct{})
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[taskArgs]) error {
		started <- job.ID
		<-release
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	cfg := &pgqueue.Config{Workers: workers, Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 1}},
		RescueInterval: 50 * time.Millisecond}
	if err := inst.Install(cfg); err != nil {
		t.Fatal(err)
	}
	client, err := pgqueue.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Stop(context.WithoutCancel(ctx)) }()
	if _, err := client.Enqueue(ctx, taskArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	id := <-started
	// Taken over under the handler: its result is refused by the fence.
	if _, err := pool.Exec(ctx, "UPDATE pgqueue.jobs SET fence = nextval('pgqueue.fence_seq') WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
	close(release)

	task := attribute.String("kind", "task")
	await(t, reader, "a rescue and a refused write", func(m map[string]metricdata.Aggregation) bool {
		return sum(m["pgqueue.jobs.rescued"], task, attribute.String("queue", "stuck"), attribute.String("state", "scheduled")) == 1 &&
			sum(m["pgqueue.writes.refused"], task, attribute.String("queue", "default")) == 1
	})
}

// A queue that empties leaves QueueList's answer; its gauges read 0 until
// the term ends, when this process stops reporting any.
func TestQueueGauges(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	inst, err := otelpgqueue.New(&otelpgqueue.Config{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	obs := inst.Observer()
	avail := func() (int64, bool) {
		return gauge(metrics(t, reader)["pgqueue.queue.jobs"], attribute.String("queue", "q"), attribute.String("state", "available"))
	}
	obs.Queues([]*pgqueue.QueueInfo{{Name: "q", Available: 3, OldestAvailableAge: time.Second}})
	if v, ok := avail(); !ok || v != 3 {
		t.Errorf("available %d, %t; want 3", v, ok)
	}
	obs.Queues([]*pgqueue.QueueInfo{})
	if v, ok := avail(); !ok || v != 0 {
		t.Errorf("after the queue emptied: %d, %t; want 0", v, ok)
	}
	obs.Queues(nil)
	if v, ok := avail(); ok {
		t.Errorf("after the term ended: %d; want no point", v)
	}
}

// newProviders returns the real SDK's meter provider, read by hand
// through reader, and tracer provider, with sampler, exporting every span
// as it ends to spans; both shut down when t ends.
func newProviders(t *testing.T, sampler sdktrace.Sampler) (reader *sdkmetric.ManualReader, mp *sdkmetric.MeterProvider, spans *tracetest.InMemoryExporter, tp *sdktrace.TracerProvider) {
	t.Helper()
	reader = sdkmetric.NewManualReader()
	mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	spans = tracetest.NewInMemoryExporter()
	tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans), sdktrace.WithSampler(sampler))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return reader, mp, spans, tp
}
