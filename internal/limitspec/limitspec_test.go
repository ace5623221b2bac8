package limitspec

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		limit   int
		period  time.Duration
		wantErr string
	}{
		{"100/1m", 100, time.Minute, ""},
		{"10/s", 10, time.Second, ""},
		{" 5 / 1h30m ", 5, 90 * time.Minute, ""},
		{"1/ms", 1, time.Millisecond, ""},
		{"3/500ms", 3, 500 * time.Millisecond, ""},
		{"100", 0, 0, "not LIMIT/PERIOD"},
		{"0/1m", 0, 0, "at least 1"},
		{"-1/1m", 0, 0, "at least 1"},
		{"x/1m", 0, 0, "at least 1"},
		{"5/fortnight", 0, 0, "not a duration"},
		{"5/10us", 0, 0, "under a millisecond"},
		{"5/-1m", 0, 0, "under a millisecond"},
	}
	for _, tt := range tests {
		limit, period, err := ParseRate(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseRate(%q) = %v, want an error with %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || limit != tt.limit || period != tt.period {
			t.Errorf("ParseRate(%q) = %d, %v, %v; want %d, %v", tt.in, limit, period, err, tt.limit, tt.period)
		}
	}
}

func TestFormatRateRoundTrips(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		period time.Duration
		want   string
	}{
		{time.Minute, "7/1m"}, {time.Hour, "7/1h"}, {90 * time.Minute, "7/1h30m"}, {10 * time.Minute, "7/10m"},
		{70 * time.Minute, "7/1h10m"}, {1500 * time.Millisecond, "7/1.5s"}, {time.Millisecond, "7/1ms"}, {24 * time.Hour, "7/24h"},
	} {
		s := FormatRate(7, tt.period)
		if s != tt.want {
			t.Errorf("FormatRate(7, %v) = %q, want %q", tt.period, s, tt.want)
		}
		if limit, period, err := ParseRate(s); err != nil || limit != 7 || period != tt.period {
			t.Errorf("ParseRate(%q) = %d, %v, %v", s, limit, period, err)
		}
	}
}

func TestParsePartitionBy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		kind    bool
		fields  []string
		wantErr string
	}{
		{"", false, nil, ""},
		{"kind", true, nil, ""},
		{"args.customer_id", false, []string{"customer_id"}, ""},
		{"kind, args.customer_id,args.region", true, []string{"customer_id", "region"}, ""},
		{"args.a.b", false, []string{"a.b"}, ""},
		{"args.a,args.b,args.c,args.d", false, []string{"a", "b", "c", "d"}, ""},
		{"args.a,args.b,args.c,args.d,args.e", false, nil, "at most 4"},
		{"customer_id", false, nil, "neither kind nor args.FIELD"},
		{"args.", false, nil, "neither kind nor args.FIELD"},
		{"kind,kind", false, nil, "kind twice"},
		{"args.x,args.x", false, nil, "args.x twice"},
	}
	for _, tt := range tests {
		kind, fields, err := ParsePartitionBy(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParsePartitionBy(%q) = %v, want an error with %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || kind != tt.kind || !slices.Equal(fields, tt.fields) {
			t.Errorf("ParsePartitionBy(%q) = %v, %q, %v; want %v, %q", tt.in, kind, fields, err, tt.kind, tt.fields)
		}
		if got := FormatPartitionBy(kind, fields); tt.in != "" && strings.ReplaceAll(tt.in, " ", "") != got {
			t.Errorf("FormatPartitionBy(ParsePartitionBy(%q)) = %q", tt.in, got)
		}
	}
	if got := FormatPartitionBy(false, nil); got != "" {
		t.Errorf("FormatPartitionBy of none = %q", got)
	}
}
