package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// slowestShown is how many of a module's slowest tests the summary names:
// where the time of a run goes, for whoever wants it shorter.
const slowestShown = 5

// printSummary writes a line per module, then the tests that skipped
// grouped by module and reason, then a total; it reports whether any
// module failed.
func printSummary(w io.Writer, results []moduleResult) (failed bool) {
	fmt.Fprintln(w, "== summary")
	width := 0
	for _, r := range results {
		width = max(width, len(r.dir))
	}
	count := map[string]int{}
	for _, r := range results {
		st := r.status()
		count[st]++
		fmt.Fprintf(w, "%s  %-*s  %6s  %d passed, %d skipped, %d failed\n",
			st, width, r.dir, r.elapsed.Round(time.Second), r.passed, r.skipped, len(r.failed))
		if r.err != nil && len(r.failed) == 0 {
			fmt.Fprintf(w, "      go test: %v\n", r.err)
		}
		if len(r.failed) > 0 {
			fmt.Fprintf(w, "      failed: %s\n", strings.Join(r.failed, ", "))
		}
		if s := slowest(r.tops, slowestShown); s != "" {
			fmt.Fprintf(w, "      slowest: %s\n", s)
		}
	}
	if lines := skipLines(results); len(lines) > 0 {
		fmt.Fprintln(w, "skipped tests (module: tests: reason):")
		for _, l := range lines {
			fmt.Fprintln(w, "  "+l)
		}
	}
	fmt.Fprintf(w, "%d modules: %d PASS, %d FAIL, %d SKIP\n", len(results), count["PASS"], count["FAIL"], count["SKIP"])
	return count["FAIL"] > 0
}

// skipLines says per module which tests skipped and why, one line per
// reason: "redislock: redislock.TestLock, redislock.TestFence: redis-server
// not found". Past four tests a reason names the first three.
func skipLines(results []moduleResult) []string {
	var lines []string
	for _, r := range results {
		var reasons []string
		tests := map[string][]string{}
		for _, s := range r.skips {
			if _, ok := tests[s.reason]; !ok {
				reasons = append(reasons, s.reason)
			}
			tests[s.reason] = append(tests[s.reason], s.test)
		}
		for _, reason := range reasons {
			names := tests[reason]
			list := strings.Join(names, ", ")
			if len(names) > 4 {
				list = fmt.Sprintf("%s and %d more", strings.Join(names[:3], ", "), len(names)-3)
			}
			lines = append(lines, fmt.Sprintf("%s: %s: %s", r.dir, list, reason))
		}
	}
	return lines
}

// slowest names the n longest tests of tops with their durations:
// "pkg.TestA 42s, pkg.TestB 9s".
func slowest(tops []timed, n int) string {
	sorted := slices.SortedFunc(slices.Values(tops), func(a, b timed) int {
		return cmp.Or(cmp.Compare(b.elapsed, a.elapsed), cmp.Compare(a.test, b.test))
	})
	var parts []string
	for _, t := range sorted[:min(n, len(sorted))] {
		parts = append(parts, fmt.Sprintf("%s %s", t.test, t.elapsed.Round(100*time.Millisecond)))
	}
	return strings.Join(parts, ", ")
}
