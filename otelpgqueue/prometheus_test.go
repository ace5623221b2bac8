package otelpgqueue_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/otelpgqueue"
	"github.com/pgqueue/pgqueue/pgqueuetest"
	"github.com/pgqueue/pgqueue/workerkit"
)

// freeAddr returns an address of 127.0.0.1 that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// scrape reads and parses /metrics; nil while the listener is not up.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %s: %s", resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

// value is the value of the family's sample whose labels include want.
func value(f *dto.MetricFamily, want map[string]string) (float64, bool) {
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// A worker built with workerkit serves the instrumentation's metrics at
// /metrics through the OpenTelemetry Prometheus exporter; the test
// scrapes and parses them after the worker worked real jobs.
func TestWorkerkitServesPrometheus(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The worker connects by itself: a database of the test's own.
	connString := pgqueuetest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, connString)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	enq, err := pgqueue.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	const jobs = 25
	for range jobs {
		if _, err := enq.Enqueue(ctx, taskArgs{Mode: "untraced"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A job due in an hour keeps its queue in the leader's counts.
	if _, err := enq.Enqueue(ctx, taskArgs{Mode: "untraced"}, &pgqueue.EnqueueOpts{Queue: "later", RunAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}

	addr := freeAddr(t)
	done := make(chan int, 1)
	go func() {
		done <- workerkit.Run(ctx, &workerkit.Options{
			Name:    "otel-worker",
			Workers: taskWorkers(t),
			Setup: func(ctx context.Context, env *workerkit.Env) error {
				mp, handler, err := otelpgqueue.NewPrometheus()
				if err != nil {
					return err
				}
				inst, err := otelpgqueue.New(&otelpgqueue.Config{MeterProvider: mp})
				if err != nil {
					return err
				}
				if err := inst.Install(env.Config); err != nil {
					return err
				}
				env.Config.Observer.QueuesInterval = 50 * time.Millisecond
				env.MetricsHandler = handler
				return nil
			},
		}, []string{"--database-url", connString, "--http-addr", addr, "--log-level", "warn"}, io.Discard, io.Discard)
	}()

	url := "http://" + addr + "/metrics"
	deadline := time.Now().Add(30 * time.Second)
	var families map[string]*dto.MetricFamily
	for {
		families = scrape(t, url)
		if n, _ := value(families["pgqueue_jobs_completed_total"], map[string]string{"kind": "task", "queue": "default"}); n == jobs {
			if n, _ := value(families["pgqueue_queue_jobs"], map[string]string{"queue": "later", "state": "scheduled"}); n == 1 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed %d completed jobs and the queue gauges: %v", jobs, families)
		}
		time.Sleep(50 * time.Millisecond) // polling a scrape target
	}
	if n, _ := value(families["pgqueue_job_duration_seconds"], map[string]string{"kind": "task", "outcome": "completed"}); n != jobs {
		t.Errorf("pgqueue_job_duration_seconds count %v, want %d", n, jobs)
	}
	if n, _ := value(families["pgqueue_job_wait_seconds"], map[string]string{"kind": "task"}); n != jobs {
		t.Errorf("pgqueue_job_wait_seconds count %v, want %d", n, jobs)
	}
	if _, ok := value(families["go_goroutines"], nil); !ok {
		t.Error("no go_goroutines: the runtime collectors are missing")
	}
	if f := families["pgqueue_jobs_completed_total"]; f.GetType() != dto.MetricType_COUNTER || f.GetHelp() == "" {
		t.Errorf("pgqueue_jobs_completed_total: type %v, help %q", f.GetType(), f.GetHelp())
	}

	cancel()
	select {
	case code := <-done:
		if code != workerkit.ExitOK {
			t.Errorf("worker exit code %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop")
	}
}
