package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
	"time"
)

// event is one line of `go test -json` (see `go doc test2json`).
type event struct {
	Action     string
	Package    string
	ImportPath string // of build-output and build-fail: "pkg [pkg.test]"
	Test       string
	Output     string
	Elapsed    float64 // seconds, on pass, fail and skip
}

// moduleResult is what one module's run came to.
type moduleResult struct {
	dir     string
	elapsed time.Duration
	err     error // go test's own failure: a build error, a non-zero exit

	passed, skipped int
	failed          []string // the failed tests, builds, and packages failed outside any test
	skips           []skip
	tops            []timed // top-level tests that passed or failed, with how long each took
}

// timed is a top-level test and how long it ran (for a parallel test,
// from its start to its end, paused time included).
type timed struct {
	test    string
	elapsed time.Duration
}

// skip is a test that called t.Skip, and the message it gave.
type skip struct {
	test, reason string
}

// status is PASS, FAIL, or SKIP when every test that ran skipped.
func (r moduleResult) status() string {
	switch {
	case r.err != nil || len(r.failed) > 0:
		return "FAIL"
	case r.passed == 0 && r.skipped > 0:
		return "SKIP"
	default:
		return "PASS"
	}
}

// parseEvents reads a go test -json stream, writes to w what go test
// would print without -v (package lines, failing tests' output, build
// errors) and counts the outcomes. Lines that are not JSON pass through.
func parseEvents(r io.Reader, w io.Writer) moduleResult {
	var res moduleResult
	// A test's output is held until the test ends: shown if it failed,
	// mined for the reason if it skipped, dropped if it passed.
	held := map[string][]string{}
	// Packages whose failure is already named by a test or a build.
	named := map[string]bool{}
	// Tests that ended: output test2json still gives one of them is the
	// package's own (test2json names the last test it saw), such as what
	// TestMain prints after the tests, e.g. a goroutine leak: shown.
	ended := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
		case e.Action == "build-fail":
			pkg, _, _ := strings.Cut(e.ImportPath, " ")
			named[pkg] = true
			res.failed = append(res.failed, pkg+" (build)")
		case e.Test == "" && e.Action == "output":
			if packageLineShown(e.Output) {
				fmt.Fprint(w, e.Output)
			}
		case e.Test == "" && e.Action == "fail":
			if !named[e.Package] { // a panic outside a test, TestMain, a timeout
				res.failed = append(res.failed, e.Package)
			}
		case e.Test == "":
			// A package's pass, or its skip for having no tests: its
			// tests are counted one by one.
		case e.Action == "output" && ended[key]:
			fmt.Fprint(w, e.Output)
		case e.Action == "output":
			held[key] = append(held[key], e.Output)
		case e.Action == "pass":
			res.passed++
			delete(held, key)
			ended[key] = true
			res.noteTop(e)
		case e.Action == "fail":
			res.noteTop(e)
			res.failed = append(res.failed, testName(e))
			named[e.Package] = true
			fmt.Fprint(w, strings.Join(held[key], ""))
			delete(held, key)
			ended[key] = true
		case e.Action == "skip":
			res.skipped++
			res.skips = append(res.skips, skip{test: testName(e), reason: skipReason(held[key])})
			delete(held, key)
			ended[key] = true
		}
	}
	if err := sc.Err(); err != nil {
		res.failed = append(res.failed, "reading go test output: "+err.Error())
	}
	return res
}

// noteTop keeps the duration of a top-level test.
func (r *moduleResult) noteTop(e event) {
	if !strings.Contains(e.Test, "/") {
		r.tops = append(r.tops, timed{test: testName(e), elapsed: time.Duration(e.Elapsed * float64(time.Second))})
	}
}

// packageLineShown reports whether a package-level line is one plain
// go test prints: not the bare PASS of -v, not "[no test files]".
func packageLineShown(s string) bool {
	return s != "PASS\n" && !strings.HasSuffix(s, "[no test files]\n")
}

// testName is the package's last element and the test, as in
// "redislock.TestLock/Expired".
func testName(e event) string {
	return path.Base(e.Package) + "." + e.Test
}

// fileLine is the "name_test.go:12: " that t.Skip puts before its message.
var fileLine = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: `)

// skipReason is what a skipped test printed, without the === and ---
// lines and the file:line prefix, on one line.
func skipReason(output []string) string {
	var parts []string
	for _, o := range output {
		t := strings.TrimSpace(o)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		parts = append(parts, strings.TrimSpace(fileLine.ReplaceAllString(o, "")))
	}
	reason := strings.Join(parts, " ")
	if reason == "" {
		return "(no message)"
	}
	if len(reason) > 200 {
		reason = reason[:197] + "..."
	}
	return reason
}
