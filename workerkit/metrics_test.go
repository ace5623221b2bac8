package workerkit_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// parseMetrics parses a /metrics body with the Prometheus text parser.
func parseMetrics(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return families
}

// sample returns the family's first sample whose labels include want.
func sample(f *dto.MetricFamily, want map[string]string) *dto.Metric {
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
		return m
	}
	return nil
}

// value is the value of the family's sample whose labels include want:
// a counter's or gauge's value, a histogram's count.
func value(f *dto.MetricFamily, want map[string]string) (float64, bool) {
	m := sample(f, want)
	switch {
	case m == nil:
		return 0, false
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount()), true
	}
	return 0, false
}

// checkSecondsHistogram checks that a seconds histogram has its buckets
// from a millisecond to an hour, cumulative, with n observations.
func checkSecondsHistogram(t *testing.T, families map[string]*dto.MetricFamily, name string, want map[string]string, n uint64) {
	t.Helper()
	f := families[name]
	m := sample(f, want)
	if f.GetType() != dto.MetricType_HISTOGRAM || m.GetHistogram() == nil {
		t.Errorf("%s%v: no histogram sample (type %v)", name, want, f.GetType())
		return
	}
	var bounds []float64
	var counts []uint64
	for _, b := range m.GetHistogram().GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
		counts = append(counts, b.GetCumulativeCount())
	}
	if len(bounds) == 0 || !math.IsInf(bounds[len(bounds)-1], 1) {
		bounds = append(bounds, math.Inf(1))
		counts = append(counts, m.GetHistogram().GetSampleCount())
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

// checkGauges checks gauges of /metrics against want, by name and labels.
func checkGauges(t *testing.T, families map[string]*dto.MetricFamily, want []gaugeWant) {
	t.Helper()
	for _, g := range want {
		if f := families[g.name]; f.GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s: type %v, want gauge", g.name, f.GetType())
			continue
		}
		if v, ok := value(families[g.name], g.labels); !ok || v != g.value {
			t.Errorf("%s%v = %v (present %v), want %v", g.name, g.labels, v, ok, g.value)
		}
	}
}

type gaugeWant struct {
	name   string
	labels map[string]string
	value  float64
}
