package bench

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestStatementName(t *testing.T) {
	for _, tc := range []struct{ sql, want string }{
		{"-- claim: take up to $2 jobs\nWITH picked AS (SELECT 1)", "claim"},
		{"  -- complete_many: write results\nUPDATE x", "complete_many"},
		{"-- The applied version: none when empty\nSELECT 1", "other"},
		{"begin", "begin"},
		{"COMMIT", "commit"},
		{"SELECT\n1", "select"},
	} {
		if got := statementName(tc.sql); got != tc.want {
			t.Errorf("statementName(%q) = %q, want %q", tc.sql, got, tc.want)
		}
	}
}

// TestProcCPU reads this process's CPU from /proc after burning some.
func TestProcCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/<pid>/stat is Linux's")
	}
	deadline := time.Now().Add(50 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x * x
	}
	cpu, ppid, ok := procCPU(os.Getpid())
	if !ok || cpu <= 0 || ppid != os.Getppid() {
		t.Fatalf("procCPU = %s, ppid %d, %v; want CPU > 0 and ppid %d", cpu, ppid, ok, os.Getppid())
	}
	if _, _, ok := procCPU(0); ok {
		t.Fatal("procCPU(0) read something")
	}
}

func TestQuantile(t *testing.T) {
	ds := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5}, {0.99, 10}, {1, 10}, {0, 1}, {0.1, 1}} {
		if got := quantile(ds, tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %d, want %d", tc.q, got, tc.want)
		}
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("quantile of nothing")
	}
}

// TestAttribute splits a run's seconds by what ran beside them and lists
// the slow ones.
func TestAttribute(t *testing.T) {
	start := time.Date(2026, 12, 6, 18, 0, 0, 0, time.UTC)
	a := &activity{start: start}
	a.record(start.Add(1500*time.Millisecond), true, false) // second 1: autovacuum
	a.record(start.Add(2100*time.Millisecond), false, true) // second 2: pruner
	a.record(start.Add(2900*time.Millisecond), true, false) // and autovacuum
	ms := time.Millisecond
	bySecond := [][]time.Duration{{1 * ms, 2 * ms}, {3 * ms, 40 * ms}, {5 * ms}, {6 * ms}}
	claims := [][]time.Duration{{ms}, {ms, 30 * ms}}
	got := attribute(a, bySecond, claims)
	want := map[string]AttributionGroup{
		"neither":               {Name: "neither", Seconds: 2, Jobs: 3, P50: 2 * ms, P99: 6 * ms, Max: 6 * ms},
		"autovacuum on jobs":    {Name: "autovacuum on jobs", Seconds: 1, Jobs: 2, P50: 3 * ms, P99: 40 * ms, Max: 40 * ms},
		"autovacuum and pruner": {Name: "autovacuum and pruner", Seconds: 1, Jobs: 1, P50: 5 * ms, P99: 5 * ms, Max: 5 * ms},
		"pruner":                {Name: "pruner"},
	}
	if len(got.Groups) != len(want) {
		t.Fatalf("groups = %+v", got.Groups)
	}
	for _, g := range got.Groups {
		if g != want[g.Name] {
			t.Errorf("group %+v, want %+v", g, want[g.Name])
		}
	}
	if len(got.Slow) != 1 || got.Slow[0] != (SlowSecond{At: time.Second, Jobs: 2, P99: 40 * ms, Max: 40 * ms, Vacuum: true, Claims: 2, ClaimMax: 30 * ms}) {
		t.Errorf("slow seconds = %+v", got.Slow)
	}
}
