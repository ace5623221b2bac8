package otelpgqueue_test

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/otelpgqueue"
	"github.com/pgqueue/pgqueue/pgqueuetest"
)

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

// buckets returns the upper bounds and cumulative counts of the
// histogram sample whose labels include want, +Inf last; ok is false when
// the family has no such histogram sample.
func buckets(f *dto.MetricFamily, want map[string]string) (bounds []float64, counts []uint64, ok bool) {
	if f.GetType() != dto.MetricType_HISTOGRAM {
		return nil, nil, false
	}
next:
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; ok && v != l.GetValue() {
				continue next
			}
		}
		h := m.GetHistogram()
		for _, b := range h.GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
			counts = append(counts, b.GetCumulativeCount())
		}
		if len(bounds) == 0 || !math.IsInf(bounds[len(bounds)-1], 1) {
			bounds = append(bounds, math.Inf(1))
			counts = append(counts, h.GetSampleCount())
		}
		return bounds, counts, true
	}
	return nil, nil, false
}

// checkSecondsHistogram checks that a seconds histogram of /metrics has
// its buckets from a millisecond to an hour, cumulative, and n
// observations.
func checkSecondsHistogram(t *testing.T, families map[string]*dto.MetricFamily, name string, want map[string]string, n uint64) {
	t.Helper()
	bounds, counts, ok := buckets(families[name], want)
	if !ok {
		t.Errorf("%s%v: no histogram sample", name, want)
		return
	}
	wantBounds := []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, math.Inf(1)}
	if !slices.Equal(bounds, wantBounds) {
		t.Errorf("%s%v: bucket bounds %v, want %v", name, want, bounds, wantBounds)
	}
	if !slices.IsSorted(counts) {
		t.Errorf("%s%v: bucket counts %v are not cumulative", name, want, counts)
	}
	if got := counts[len(counts)-1]; got != n {
		t.Errorf("%s%v: +Inf bucket %d, want %d", name, want, got, n)
	}
}

// The handler of NewPrometheus, on a real HTTP server, serves the
// instrumentation's metrics in the Prometheus text format: the test
// works real jobs, scrapes /metrics, parses it with expfmt and checks
// the histograms' buckets and the leader's backlog gauges.
func TestPrometheusHistogramsAndBacklog(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgqueuetest.NewPool(t)
	mp, handler, err := otelpgqueue.NewPrometheus()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	inst, err := otelpgqueue.New(&otelpgqueue.Config{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &pgqueue.Config{Workers: taskWorkers(t), Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 5}}}
	if err := inst.Install(cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Observer.QueuesInterval = 50 * time.Millisecond
	// A job due in an hour keeps its queue in the leader's counts.
	enq, err := pgqueue.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enq.Enqueue(ctx, taskArgs{Mode: "untraced"}, &pgqueue.EnqueueOpts{Queue: "later", RunAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	client, err := pgqueue.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Stop(context.Background()) })
	const jobs = 25
	for range jobs {
		if _, err := client.Enqueue(ctx, taskArgs{Mode: "untraced"}, nil); err != nil {
			t.Fatal(err)
		}
	}

	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	families := awaitScrape(t, srv.URL+"/metrics", func(families map[string]*dto.MetricFamily) bool {
		done, _ := value(families["pgqueue_jobs_completed_total"], map[string]string{"kind": "task", "queue": "default"})
		later, _ := value(families["pgqueue_queue_jobs"], map[string]string{"queue": "later", "state": "scheduled"})
		return done == jobs && later == 1
	})
	checkScrape(t, families, jobs)
}

// awaitScrape scrapes url until cond holds of the parsed families, and
// returns them.
func awaitScrape(t *testing.T, url string, cond func(map[string]*dto.MetricFamily) bool) map[string]*dto.MetricFamily {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		families := scrape(t, url)
		if families != nil && cond(families) {
			return families
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed what the test waits for:\n%v", families)
		}
		time.Sleep(50 * time.Millisecond) // polling a scrape target
	}
}

// checkScrape checks what a scrape shows once jobs "task" jobs completed
// in the default queue and one waits in "later".
func checkScrape(t *testing.T, families map[string]*dto.MetricFamily, jobs uint64) {
	t.Helper()
	checkSecondsHistogram(t, families, "pgqueue_job_duration_seconds", map[string]string{"queue": "default", "kind": "task", "outcome": "completed"}, jobs)
	checkSecondsHistogram(t, families, "pgqueue_job_wait_seconds", map[string]string{"queue": "default", "kind": "task"}, jobs)
	if f := families["pgqueue_queue_jobs"]; f.GetType() != dto.MetricType_GAUGE {
		t.Errorf("pgqueue_queue_jobs: type %v, want gauge", f.GetType())
	}
	for _, q := range []struct {
		queue, state string
		want         float64
	}{
		{"later", "blocked", 0}, {"later", "scheduled", 1}, {"later", "available", 0}, {"later", "running", 0},
	} {
		if n, ok := value(families["pgqueue_queue_jobs"], map[string]string{"queue": q.queue, "state": q.state}); !ok || n != q.want {
			t.Errorf("pgqueue_queue_jobs{queue=%q,state=%q} = %v (present %v), want %v", q.queue, q.state, n, ok, q.want)
		}
	}
	for _, name := range []string{"pgqueue_queue_oldest_available_age_seconds", "pgqueue_queue_paused"} {
		if _, ok := value(families[name], map[string]string{"queue": "later"}); !ok {
			t.Errorf("no %s{queue=\"later\"}", name)
		}
	}
	if n, ok := value(families["pgqueue_jobs_running"], nil); !ok || n != 0 {
		t.Errorf("pgqueue_jobs_running = %v (present %v), want 0", n, ok)
	}
	if _, ok := value(families["go_goroutines"], nil); !ok {
		t.Error("no go_goroutines: the runtime collectors are missing")
	}
	if f := families["pgqueue_jobs_completed_total"]; f.GetType() != dto.MetricType_COUNTER || f.GetHelp() == "" {
		t.Errorf("pgqueue_jobs_completed_total: type %v, help %q", f.GetType(), f.GetHelp())
	}
}
