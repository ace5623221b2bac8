package otelpgqueue

import (
	"context"
	"math/rand/v2"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func TestScanTraceparent(t *testing.T) {
	for _, tc := range []struct {
		meta        string
		low         uint64
		sampled, ok bool
	}{
		// as jsonb prints it, and as written
		{`{"otel": {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}`, 0x8448eb211c80319c, true, true},
		{`{"otel":{"traceparent":"00-0af7651916cd43dd8448EB211C80319C-b7ad6b7169203331-00"}}`, 0x8448eb211c80319c, false, true},
		{`{"otel": {"b3": "x"}}`, 0, false, false},
		{`{"otel": {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b71692033"}}`, 0, false, false},
		{`{"otel": {"traceparent": "00-0af7651916cd43dd8448eb211c80319z-b7ad6b7169203331-01"}}`, 0, false, false},
	} {
		low, sampled, ok := scanTraceparent([]byte(tc.meta))
		if low != tc.low || sampled != tc.sampled || ok != tc.ok {
			t.Errorf("%s: %x %t %t, want %x %t %t", tc.meta, low, sampled, ok, tc.low, tc.sampled, tc.ok)
		}
	}
}

// A trace id gets the same answer from SpanRatio as from the SDK's
// TraceIDRatioBased at the same fraction.
func TestChosenAgreesWithTraceIDRatioBased(t *testing.T) {
	for _, ratio := range []float64{0.01, 0.3, 0.5} {
		in, err := New(&Config{SpanRatio: ratio})
		if err != nil {
			t.Fatal(err)
		}
		sdk := sdktrace.TraceIDRatioBased(ratio)
		var yes int
		for range 10000 {
			var id trace.TraceID
			for i := range id {
				id[i] = byte(rand.Uint32())
			}
			want := sdk.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: id}).Decision == sdktrace.RecordAndSample
			if got := in.chosen(traceIDHash(id)); got != want {
				t.Fatalf("ratio %g, trace %v: chosen %t, SDK %t", ratio, id, got, want)
			}
			if want {
				yes++
			}
		}
		if yes == 0 {
			t.Errorf("ratio %g: no trace id chosen of 10000", ratio)
		}
	}
}

// The job id's hash chooses about the ratio of consecutive ids.
func TestChosenByJobID(t *testing.T) {
	in, err := New(&Config{SpanRatio: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	var yes int
	for id := range uint64(100000) {
		if in.chosen(mix64(id + 1)) {
			yes++
		}
	}
	if yes < 9000 || yes > 11000 {
		t.Errorf("%d of 100000 consecutive ids chosen at 0.1", yes)
	}
}
