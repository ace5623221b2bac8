package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// stream is a go test -json run: a pass, a skip with its message, a failure
// with its log, a subtest, and package lines.
const stream = `go: downloading example.com/x v1.0.0
{"Action":"start","Package":"example.com/m/redislock"}
{"Action":"run","Package":"example.com/m/redislock","Test":"TestOK"}
{"Action":"output","Package":"example.com/m/redislock","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"example.com/m/redislock","Test":"TestOK","Output":"    ok_test.go:9: a log line of a passing test\n"}
{"Action":"pass","Package":"example.com/m/redislock","Test":"TestOK","Elapsed":2.5}
{"Action":"run","Package":"example.com/m/redislock","Test":"TestServer"}
{"Action":"output","Package":"example.com/m/redislock","Test":"TestServer","Output":"=== RUN   TestServer\n"}
{"Action":"output","Package":"example.com/m/redislock","Test":"TestServer","Output":"    server_test.go:30: redis-server not found\n"}
{"Action":"output","Package":"example.com/m/redislock","Test":"TestServer","Output":"--- SKIP: TestServer (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/redislock","Test":"TestServer","Elapsed":0}
{"Action":"run","Package":"example.com/m/redislock","Test":"TestBroken/Sub"}
{"Action":"output","Package":"example.com/m/redislock","Test":"TestBroken/Sub","Output":"    broken_test.go:12: got 1, want 2\n"}
{"Action":"output","Package":"example.com/m/redislock","Test":"TestBroken/Sub","Output":"--- FAIL: TestBroken/Sub (0.00s)\n"}
{"Action":"fail","Package":"example.com/m/redislock","Test":"TestBroken/Sub","Elapsed":0}
{"Action":"output","Package":"example.com/m/redislock","Test":"TestOK","Output":"goroutine leak: found unexpected goroutines\n"}
{"Action":"output","Package":"example.com/m/redislock","Output":"PASS\n"}
{"Action":"output","Package":"example.com/m/redislock","Output":"FAIL\texample.com/m/redislock\t0.01s\n"}
{"Action":"fail","Package":"example.com/m/redislock","Elapsed":0.01}
{"Action":"output","Package":"example.com/m/empty","Output":"?   \texample.com/m/empty\t[no test files]\n"}
{"Action":"skip","Package":"example.com/m/empty","Elapsed":0}
{"ImportPath":"example.com/m/broken [example.com/m/broken.test]","Action":"build-output","Output":"./x.go:2:14: syntax error\n"}
{"ImportPath":"example.com/m/broken [example.com/m/broken.test]","Action":"build-fail"}
{"Action":"fail","Package":"example.com/m/broken","Elapsed":0}
{"Action":"pass","Package":"example.com/m/other","Elapsed":0}
`

func TestParseEvents(t *testing.T) {
	var out bytes.Buffer
	res := parseEvents(strings.NewReader(stream), &out)
	if res.passed != 1 || res.skipped != 1 {
		t.Errorf("passed %d, skipped %d; want 1 and 1", res.passed, res.skipped)
	}
	if got := strings.Join(res.failed, ","); got != "redislock.TestBroken/Sub,example.com/m/broken (build)" {
		t.Errorf("failed %q", got)
	}
	if len(res.skips) != 1 || res.skips[0] != (skip{"redislock.TestServer", "redis-server not found"}) {
		t.Errorf("skips %+v", res.skips)
	}
	// A subtest is not a top-level test; a failed top-level one would be.
	if len(res.tops) != 1 || res.tops[0] != (timed{"redislock.TestOK", 2500 * time.Millisecond}) {
		t.Errorf("top-level tests timed %+v", res.tops)
	}
	shown := out.String()
	// The leak is TestMain's, printed after TestOK passed: test2json still
	// names TestOK.
	for _, want := range []string{"go: downloading", "got 1, want 2", "syntax error", "FAIL\texample.com/m/redislock", "goroutine leak"} {
		if !strings.Contains(shown, want) {
			t.Errorf("output lacks %q:\n%s", want, shown)
		}
	}
	for _, hidden := range []string{"a log line of a passing test", "no test files", "PASS\n"} {
		if strings.Contains(shown, hidden) {
			t.Errorf("output shows %q:\n%s", hidden, shown)
		}
	}
}

func TestStatus(t *testing.T) {
	for _, c := range []struct {
		r    moduleResult
		want string
	}{
		{moduleResult{passed: 3, skipped: 1}, "PASS"},
		{moduleResult{skipped: 2}, "SKIP"},
		{moduleResult{passed: 3, failed: []string{"x.TestA"}}, "FAIL"},
		{moduleResult{passed: 3, err: errors.New("exit status 1")}, "FAIL"},
	} {
		if got := c.r.status(); got != c.want {
			t.Errorf("%+v: status %s, want %s", c.r, got, c.want)
		}
	}
}

func TestPrintSummary(t *testing.T) {
	skips := []skip{{"a.TestA", "no server"}, {"a.TestB", "no server"}, {"a.TestC", "no server"},
		{"a.TestD", "no server"}, {"a.TestE", "no server"}, {"a.TestF", "-short"}}
	results := []moduleResult{
		{dir: ".", passed: 10, tops: []timed{{"m.TestQuick", time.Second}, {"m.TestSlow", 42 * time.Second}}},
		{dir: "redislock", skipped: 6, skips: skips},
		{dir: "etcdlock", passed: 1, failed: []string{"etcdlock.TestX"}},
	}
	var out bytes.Buffer
	if !printSummary(&out, results) {
		t.Error("a failed module: want failed")
	}
	for _, want := range []string{
		"PASS  .        ", "slowest: m.TestSlow 42s, m.TestQuick 1s", "SKIP  redislock", "FAIL  etcdlock", "failed: etcdlock.TestX",
		"redislock: a.TestA, a.TestB, a.TestC and 2 more: no server",
		"redislock: a.TestF: -short",
		"3 modules: 1 PASS, 1 FAIL, 1 SKIP",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

func TestParallelism(t *testing.T) {
	for _, c := range []struct {
		jobs    int
		url     string
		want    int
		ignored bool
	}{
		{1, "", 1, false},
		{0, "", 1, false},
		{4, "", 4, false},
		{1, "postgres://shared/db", 1, false},
		// Modules at once would share the server and its connection budget.
		{4, "postgres://shared/db", 1, true},
	} {
		n, why := parallelism(c.jobs, c.url)
		if n != c.want || (why != "") != c.ignored {
			t.Errorf("parallelism(%d, %q) = %d, %q; want %d, ignored %v", c.jobs, c.url, n, why, c.want, c.ignored)
		}
	}
}

func TestRunModules(t *testing.T) {
	dirs := []string{".", "redislock", "etcdlock", "workerkit"}
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("j=%d", n), func(t *testing.T) {
			var running, most atomic.Int32
			// Each module writes three lines, pausing between them, so
			// modules run at once would interleave if not held.
			run := func(dir string, w io.Writer) moduleResult {
				now := running.Add(1)
				defer running.Add(-1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				for i := range 3 {
					fmt.Fprintf(w, "%s line %d\n", dir, i)
					time.Sleep(10 * time.Millisecond)
				}
				return moduleResult{dir: dir, passed: len(dir)}
			}
			var out bytes.Buffer
			results := runModules(dirs, n, &out, "go test -json ./...", run)
			for i, r := range results {
				if r.dir != dirs[i] || r.passed != len(dirs[i]) {
					t.Errorf("result %d: %+v; want module %s's", i, r, dirs[i])
				}
			}
			if got := int(most.Load()); got != n {
				t.Errorf("at most %d modules ran at once; want %d", got, n)
			}
			for _, dir := range dirs {
				block := fmt.Sprintf("%[1]s line 0\n%[1]s line 1\n%[1]s line 2\n", dir)
				if !strings.Contains(out.String(), block) {
					t.Errorf("module %s's output is not in one piece:\n%s", dir, out.String())
				}
				if !strings.Contains(out.String(), "== "+dir+": go test -json ./...") {
					t.Errorf("no header for module %s:\n%s", dir, out.String())
				}
			}
		})
	}
}
