package workerkit

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/otelpgqueue"
)

// scopeName is the instrumentation scope of the kit's own gauges.
const scopeName = "github.com/pgqueue/pgqueue/workerkit"

// metrics is what /metrics serves: otelpgqueue's instruments of the
// client and the process's own gauges, on one OpenTelemetry meter
// provider read by the Prometheus exporter (otelpgqueue.NewPrometheus).
// There is one set of names, whether a program uses the kit or installs
// otelpgqueue itself.
type metrics struct {
	provider *sdkmetric.MeterProvider
	handler  http.Handler
}

// newMetrics returns the process's metrics; their gauges read p.
func newMetrics(p *process) (*metrics, error) {
	mp, handler, err := otelpgqueue.NewPrometheus()
	if err != nil {
		return nil, err
	}
	m := &metrics{provider: mp, handler: handler}
	if err := m.registerProcess(p); err != nil {
		_ = mp.Shutdown(context.Background())
		return nil, err
	}
	return m, nil
}

// registerProcess registers the gauges of what the kit itself knows: its
// state (as /readyz) and its pool.
func (m *metrics) registerProcess(p *process) error {
	meter := m.provider.Meter(scopeName)
	ready, err := meter.Int64ObservableGauge("pgqueue.worker.ready",
		metric.WithDescription("1 when the client is started and not draining, as /readyz."))
	if err != nil {
		return err
	}
	draining, err := meter.Int64ObservableGauge("pgqueue.worker.draining",
		metric.WithDescription("1 while the process drains after a stop signal."))
	if err != nil {
		return err
	}
	conns, err := meter.Int64ObservableGauge("pgqueue.pool.connections", metric.WithUnit("{connection}"),
		metric.WithDescription("Connections of this process's pool, by state (acquired, idle, constructing)."))
	if err != nil {
		return err
	}
	maxConns, err := meter.Int64ObservableGauge("pgqueue.pool.max_connections", metric.WithUnit("{connection}"),
		metric.WithDescription("The limit of this process's pool."))
	if err != nil {
		return err
	}
	acquired := metric.WithAttributes(attribute.String("state", "acquired"))
	idle := metric.WithAttributes(attribute.String("state", "idle"))
	constructing := metric.WithAttributes(attribute.String("state", "constructing"))
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		state := p.state.Load()
		o.ObserveInt64(ready, b2i(state == stateReady))
		o.ObserveInt64(draining, b2i(state == stateDraining))
		if pool := p.pool.Load(); pool != nil {
			st := pool.Stat()
			o.ObserveInt64(conns, int64(st.AcquiredConns()), acquired)
			o.ObserveInt64(conns, int64(st.IdleConns()), idle)
			o.ObserveInt64(conns, int64(st.ConstructingConns()), constructing)
			o.ObserveInt64(maxConns, int64(st.MaxConns()))
		}
		return nil
	}, ready, draining, conns, maxConns)
	return err
}

// install puts otelpgqueue's instrumentation in cfg, in front of the
// program's: its insert and work middleware first (so the run time covers
// the others) and its Observer, chained before the program's own.
func (m *metrics) install(cfg *pgqueue.Config, tp trace.TracerProvider) error {
	inst, err := otelpgqueue.New(&otelpgqueue.Config{MeterProvider: m.provider, TracerProvider: tp})
	if err != nil {
		return err
	}
	cfg.EnqueueMiddleware = append([]pgqueue.EnqueueMiddleware{inst.EnqueueMiddleware()}, cfg.EnqueueMiddleware...)
	cfg.WorkMiddleware = append([]pgqueue.WorkMiddleware{inst.WorkMiddleware()}, cfg.WorkMiddleware...)
	cfg.Observer = chainObservers(inst.Observer(), cfg.Observer)
	return nil
}

// shutdown releases the meter provider.
func (m *metrics) shutdown(ctx context.Context) {
	_ = m.provider.Shutdown(ctx)
}

// chainObservers returns an Observer that calls first's functions, then
// then's, if any; QueuesInterval is then's.
func chainObservers(first, then *pgqueue.Observer) *pgqueue.Observer {
	if then == nil {
		return first
	}
	o := *then
	o.Claimed = chain2(first.Claimed, then.Claimed)
	o.BatchWritten = chain1(first.BatchWritten, then.BatchWritten)
	o.ResultRecorded = chain2(first.ResultRecorded, then.ResultRecorded)
	o.WriteRefused = chain2(first.WriteRefused, then.WriteRefused)
	o.Rescued = chain1(first.Rescued, then.Rescued)
	o.Queues = chain1(first.Queues, then.Queues)
	return &o
}

// chain1 returns a function that calls a then b; nil ones are skipped.
func chain1[A any](a, b func(A)) func(A) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(x A) { a(x); b(x) }
}

// chain2 is chain1 for functions of two arguments.
func chain2[A, B any](a, b func(A, B)) func(A, B) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(x A, y B) { a(x, y); b(x, y) }
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
