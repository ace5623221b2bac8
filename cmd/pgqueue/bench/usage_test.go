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
