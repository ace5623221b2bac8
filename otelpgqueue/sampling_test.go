package otelpgqueue_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/otelpgqueue"
	"github.com/pgqueue/pgqueue/pgqueuetest"
)

// countingProvider counts the spans started through its tracers: what
// otelpgqueue asks of the SDK.
type countingProvider struct {
	trace.TracerProvider
	starts *atomic.Int64
}

func (p countingProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return countingTracer{p.TracerProvider.Tracer(name, opts...), p.starts}
}

type countingTracer struct {
	trace.Tracer
	starts *atomic.Int64
}

func (t countingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	t.starts.Add(1)
	return t.Tracer.Start(ctx, name, opts...)
}

// spanRun enqueues with enqueue, works the jobs to completion with the
// instrumentation at ratio, and returns the spans and the count of
// starts otelpgqueue asked for.
func spanRun(t *testing.T, ratio float64, sampler sdktrace.Sampler, jobs int,
	enqueue func(ctx context.Context, tp trace.TracerProvider, client *pgqueue.Client) []*pgqueue.JobRow,
) (spans tracetest.SpanStubs, starts int64, rows []*pgqueue.JobRow) {
	t.Helper()
	ctx := t.Context()
	pool := pgqueuetest.NewPool(t)
	reader, mp, exp, tp := newProviders(t, sampler)
	var n atomic.Int64
	inst, err := otelpgqueue.New(&otelpgqueue.Config{MeterProvider: mp,
		TracerProvider: countingProvider{tp, &n}, SpanRatio: ratio})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &pgqueue.Config{Workers: taskWorkers(t), Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 4}}}
	if err := inst.Install(cfg); err != nil {
		t.Fatal(err)
	}
	client, err := pgqueue.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rows = enqueue(ctx, tp, client)
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	await(t, reader, "every job completed", func(m map[string]metricdata.Aggregation) bool {
		return sum(m["pgqueue.jobs.completed"], attribute.String("kind", "task")) == int64(jobs)
	})
	if err := client.Stop(context.WithoutCancel(ctx)); err != nil {
		t.Fatal(err)
	}
	return exp.GetSpans(), n.Load(), rows
}

func byName(spans tracetest.SpanStubs, prefix string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if strings.HasPrefix(s.Name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// At SpanRatio 0 (the default) the work of a traced request is traced,
// as a child of its enqueue span and linked to it, and nothing else
// reaches the SDK, even under a sampler that would keep every span.
func TestSpanRatioZero(t *testing.T) {
	t.Parallel()
	var req trace.Span
	spans, starts, rows := spanRun(t, 0, sdktrace.AlwaysSample(), 3,
		func(ctx context.Context, tp trace.TracerProvider, client *pgqueue.Client) []*pgqueue.JobRow {
			var reqCtx context.Context
			reqCtx, req = tp.Tracer("test").Start(ctx, "request")
			traced, err := client.Enqueue(reqCtx, taskArgs{Mode: "ok"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.End()
			var rows []*pgqueue.JobRow
			for range 2 {
				j, err := client.Enqueue(ctx, taskArgs{Mode: "untraced"}, nil)
				if err != nil {
					t.Fatal(err)
				}
				rows = append(rows, j.JobRow)
			}
			return append([]*pgqueue.JobRow{traced.JobRow}, rows...)
		})
	enq, work := byName(spans, "pgqueue.enqueue"), byName(spans, "pgqueue.work")
	if len(enq) != 1 || len(work) != 1 {
		t.Fatalf("%d enqueue spans, %d work spans; want 1 and 1 (the traced request's)", len(enq), len(work))
	}
	if enq[0].Parent.SpanID() != req.SpanContext().SpanID() {
		t.Errorf("enqueue span's parent %v, want the request %v", enq[0].Parent.SpanID(), req.SpanContext().SpanID())
	}
	w := work[0]
	if w.Parent.SpanID() != enq[0].SpanContext.SpanID() || w.SpanContext.TraceID() != req.SpanContext().TraceID() ||
		len(w.Links) != 1 || w.Links[0].SpanContext.SpanID() != enq[0].SpanContext.SpanID() {
		t.Errorf("work span: parent %v, trace %v, links %+v; want the enqueue span %v as parent and link",
			w.Parent.SpanID(), w.SpanContext.TraceID(), w.Links, enq[0].SpanContext.SpanID())
	}
	var id attribute.Value
	for _, kv := range w.Attributes {
		if kv.Key == "messaging.message.id" {
			id = kv.Value
		}
	}
	if id.AsString() != strconv.FormatInt(rows[0].ID, 10) {
		t.Errorf("work span's job id %q, want %d", id.AsString(), rows[0].ID)
	}
	if starts != 2 {
		t.Errorf("otelpgqueue started %d spans, want 2 (the traced enqueue and its attempt)", starts)
	}
	for _, j := range rows[1:] {
		if strings.Contains(string(j.Meta), otelpgqueue.MetaKey) {
			t.Errorf("untraced job %d stores a trace context: %s", j.ID, j.Meta)
		}
	}
}

// At SpanRatio 1 every insert and attempt goes to the SDK, whose
// sampler decides, as before the option.
func TestSpanRatioOne(t *testing.T) {
	t.Parallel()
	const jobs = 5
	spans, starts, _ := spanRun(t, 1, sdktrace.AlwaysSample(), jobs,
		func(ctx context.Context, _ trace.TracerProvider, client *pgqueue.Client) []*pgqueue.JobRow {
			for range jobs {
				if _, err := client.Enqueue(ctx, taskArgs{Mode: "ok"}, nil); err != nil {
					t.Fatal(err)
				}
			}
			return nil
		})
	enq, work := byName(spans, "pgqueue.enqueue"), byName(spans, "pgqueue.work")
	if len(enq) != jobs || len(work) != jobs || starts != 2*jobs {
		t.Fatalf("%d enqueue spans, %d work spans, %d starts; want %d, %d, %d", len(enq), len(work), starts, jobs, jobs, 2*jobs)
	}
	for _, w := range work {
		if len(w.Links) != 1 || w.Parent.SpanID() != w.Links[0].SpanContext.SpanID() {
			t.Errorf("work span %v: parent %v, links %+v; want its enqueue span as both", w.SpanContext.SpanID(), w.Parent.SpanID(), w.Links)
		}
	}
}

// An unsampled enqueue stores no context; under the SDK's own
// ParentBased(NeverSample) nothing is recorded, and at SpanRatio 0 no
// attempt even asks.
func TestSpanRatioUnsampledParent(t *testing.T) {
	t.Parallel()
	spans, starts, rows := spanRun(t, 0, sdktrace.ParentBased(sdktrace.NeverSample()), 1,
		func(ctx context.Context, tp trace.TracerProvider, client *pgqueue.Client) []*pgqueue.JobRow {
			reqCtx, req := tp.Tracer("test").Start(ctx, "request") // not sampled
			defer req.End()
			j, err := client.Enqueue(reqCtx, taskArgs{Mode: "untraced"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return []*pgqueue.JobRow{j.JobRow}
		})
	if len(spans) != 0 || starts != 0 {
		t.Errorf("%d spans, %d starts; want none", len(spans), starts)
	}
	if strings.Contains(string(rows[0].Meta), otelpgqueue.MetaKey) {
		t.Errorf("job stores an unsampled context: %s", rows[0].Meta)
	}
}
