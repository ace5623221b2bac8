package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

// streamJob is the job the streaming tests seed: args of a realistic
// size.
type streamJob struct {
	N    int    `json:"n"`
	Note string `json:"note"`
}

func (streamJob) Kind() string { return "stream" }

type streamOther struct{}

func (streamOther) Kind() string { return "stream_other" }

// seedJobs makes a migrated database with n streamJob jobs (available)
// and other jobs of kind stream_other, inserted by EnqueueMany (a binary
// COPY) in chunks, and returns its URL and a pool on it.
func seedJobs(t *testing.T, n, other int) (string, *pgxpool.Pool) {
	t.Helper()
	ctx := t.Context()
	url := pgtest.DB().NewDatabase(t)
	pool, err := pgxpool.New(ctx, url)
	must(t, err)
	t.Cleanup(pool.Close)
	_, err = pgqueue.Migrate(ctx, pool, pgqueue.SchemaDefault)
	must(t, err)
	client, err := pgqueue.New(pool, nil)
	must(t, err)
	const chunk = 50_000
	note := strings.Repeat("x", 100)
	for done := 0; done < n; done += chunk {
		params := make([]pgqueue.EnqueueManyParams, 0, min(chunk, n-done))
		for i := done; i < n && i < done+chunk; i++ {
			params = append(params, pgqueue.EnqueueManyParams{Args: streamJob{N: i, Note: note}})
		}
		_, err := client.EnqueueMany(ctx, params)
		must(t, err)
	}
	if other > 0 {
		params := make([]pgqueue.EnqueueManyParams, other)
		for i := range params {
			params[i] = pgqueue.EnqueueManyParams{Args: streamOther{}}
		}
		_, err := client.EnqueueMany(ctx, params)
		must(t, err)
	}
	return url, pool
}

// checkIDsDescending checks that ids are n distinct ids, newest first.
func checkIDsDescending(t *testing.T, what string, ids []int64, n int) {
	t.Helper()
	if len(ids) != n {
		t.Fatalf("%s: %d jobs, want %d", what, len(ids), n)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] >= ids[i-1] {
			t.Fatalf("%s: id %d after %d: not newest first, or repeated", what, ids[i], ids[i-1])
		}
	}
}

// jobs list --all reads every job, in pages of --batch, as NDJSON, one
// JSON array or a table; filters apply as on one page.
func TestJobsListAll(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "the CLI's jobs list of every job, streamed")
	const n, other = 2_345, 55
	url, _ := seedJobs(t, n, other)
	ctx := t.Context()
	list := func(args ...string) string {
		t.Helper()
		code, stdout, stderr := runCLI(ctx, append([]string{"jobs", "list", "--database-url", url}, args...)...)
		if code != exitOK {
			t.Fatalf("jobs list %v: exit %d\n%s", args, code, stderr)
		}
		return stdout
	}

	var ids []int64
	sc := bufio.NewScanner(strings.NewReader(list("--all", "--batch", "500", "--ndjson", "--kind", "stream")))
	for sc.Scan() {
		var j struct {
			ID   int64           `json:"id"`
			Kind string          `json:"kind"`
			Args json.RawMessage `json:"args"`
		}
		if err := json.Unmarshal(sc.Bytes(), &j); err != nil {
			t.Fatalf("line %d is not a JSON object: %v\n%s", len(ids)+1, err, sc.Text())
		}
		if j.Kind != "stream" {
			t.Fatalf("kind %q passed --kind stream", j.Kind)
		}
		ids = append(ids, j.ID)
	}
	checkIDsDescending(t, "--ndjson", ids, n)

	var all []struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal([]byte(list("--all", "--batch", "1000", "--json")), &all); err != nil {
		t.Fatalf("--all --json is not one JSON array: %v", err)
	}
	ids = ids[:0]
	for _, j := range all {
		ids = append(ids, j.ID)
	}
	checkIDsDescending(t, "--json", ids, n+other)
	if out := list("--all", "--json", "--kind", "nobody"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("--all --json of no job: %q, want []", out)
	}

	table := list("--all", "--batch", "1000", "--kind", "stream_other")
	if rows := strings.Count(table, " stream_other "); rows != other {
		t.Fatalf("table: %d rows of stream_other, want %d:\n%s", rows, other, table)
	}

	// One page as NDJSON: its jobs on stdout, the next page's cursor on
	// stderr.
	code, stdout, stderr := runCLI(ctx, "jobs", "list", "--database-url", url, "--ndjson", "--limit", "7")
	if code != exitOK || strings.Count(stdout, "\n") != 7 || !strings.Contains(stderr, "next page: --cursor ") {
		t.Fatalf("--ndjson --limit 7: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}

	for _, bad := range [][]string{
		{"--all", "--limit", "5"},
		{"--batch", "5"},
		{"--all", "--batch", "0"},
		{"--json", "--ndjson"},
	} {
		if code, _, stderr := runCLI(ctx, append([]string{"jobs", "list", "--database-url", url}, bad...)...); code != exitUsage {
			t.Errorf("jobs list %v: exit %d, want %d\n%s", bad, code, exitUsage, stderr)
		}
	}
}

// retry, cancel and delete by filter act on every job that passes the
// filters, batch after batch, and on no other; they print counts.
func TestJobsControlByFilter(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "the CLI's retry, cancel and delete by filter")
	const n, other = 1_234, 40
	url, pool := seedJobs(t, n, other)
	ctx := t.Context()
	control := func(want int, args ...string) string {
		t.Helper()
		code, stdout, stderr := runCLI(ctx, append([]string{"jobs", args[0], "--database-url", url}, args[1:]...)...)
		if code != want {
			t.Fatalf("jobs %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, stdout, stderr)
		}
		return stdout
	}
	counts := func() map[string]int {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT kind || ' ' || state, count(*) FROM pgqueue.jobs GROUP BY 1`)
		must(t, err)
		m := map[string]int{}
		for rows.Next() {
			var k string
			var c int
			must(t, rows.Scan(&k, &c))
			m[k] = c
		}
		must(t, rows.Err())
		return m
	}
	same := func(got, want map[string]int) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("jobs by kind and state: %v, want %v", got, want)
		}
	}

	if out := control(exitOK, "cancel", "--kind", "stream", "--batch", "100"); !strings.Contains(out, "cancelled: 1234\n") {
		t.Fatalf("cancel by filter printed:\n%s", out)
	}
	same(counts(), map[string]int{"stream cancelled": n, "stream_other available": other})
	// Cancelled already: unchanged.
	if out := control(exitOK, "cancel", "--kind", "stream", "--json"); !strings.Contains(out, `"done": 0`) || !strings.Contains(out, `"unchanged": 1234`) {
		t.Fatalf("cancel again printed:\n%s", out)
	}
	if out := control(exitOK, "retry", "--state", "cancelled", "--batch", "333"); !strings.Contains(out, "retried: 1234\n") {
		t.Fatalf("retry by filter printed:\n%s", out)
	}
	same(counts(), map[string]int{"stream available": n, "stream_other available": other})
	if out := control(exitOK, "delete", "--kind", "stream_other"); !strings.Contains(out, "deleted: 40\n") {
		t.Fatalf("delete by filter printed:\n%s", out)
	}
	same(counts(), map[string]int{"stream available": n})
	if out := control(exitOK, "delete", "--all", "--batch", "500"); !strings.Contains(out, "deleted: 1234\n") {
		t.Fatalf("delete --all printed:\n%s", out)
	}
	same(counts(), map[string]int{})

	control(exitUsage, "delete")                         // neither ids nor filters
	control(exitUsage, "delete", "1", "--kind", "email") // both
	control(exitUsage, "retry", "--all", "--batch", "0")
}

// buildCLI builds the pgqueue binary into a directory of the test's, for
// the tests that run it as a process of its own (go build's cache makes
// the second build cheap).
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pgqueue")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// `jobs list --all --ndjson | head -n 3` prints three whole lines, and the
// command ends at once by SIGPIPE (exit status 141 in a shell), quietly:
// nothing on stderr.
func TestJobsListHeadSIGPIPE(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "the CLI's jobs list ending quietly when its reader (head) goes away")
	url, _ := seedJobs(t, 20_000, 0)
	bin := buildCLI(t)
	cmd := exec.Command(bin, "jobs", "list", "--database-url", url, "--all", "--ndjson", "--batch", "100")
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	r := bufio.NewReader(stdout)
	for i := range 3 { // head -n 3
		line, err := r.ReadBytes('\n')
		must(t, err)
		var j struct {
			ID int64 `json:"id"`
		}
		if err := json.Unmarshal(line, &j); err != nil || j.ID == 0 {
			t.Fatalf("line %d: %v: %s", i+1, err, line)
		}
	}
	must(t, stdout.Close()) // head exits
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the command went on after its reader left")
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("exit: %v, want death by SIGPIPE", err)
	}
	if ws := exit.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGPIPE {
		t.Fatalf("exit status %v, want killed by SIGPIPE (141 in a shell)", ws)
	}
	if stderr.Len() > 0 {
		t.Fatalf("stderr, want nothing:\n%s", stderr.String())
	}
}

// At a million jobs, listing (NDJSON and one JSON array) and retry,
// cancel and delete of them all each run in one invocation with a max RSS
// under 64 MiB: memory is that of a page, not of the table. It logs each
// command's time and max RSS.
func TestJobsMillionRows(t *testing.T) {
	skipInShortMode(t, "a million jobs through the CLI's list, retry, cancel and delete")
	t.Parallel()
	const n = 1_000_000
	const maxRSS = 64 << 20
	start := time.Now()
	url, pool := seedJobs(t, n, 0)
	t.Logf("seeded %d jobs in %s", n, time.Since(start).Round(time.Millisecond))
	bin := buildCLI(t)
	ctx := t.Context()

	// runCmd runs the binary with args, hands its stdout to read, and
	// returns its max RSS.
	runCmd := func(read func(io.Reader) error, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append(args, "--database-url", url)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		must(t, err)
		began := time.Now()
		must(t, cmd.Start())
		hwm := watchPeakRSS(cmd.Process.Pid)
		rerr := read(stdout)
		_, _ = io.Copy(io.Discard, stdout)
		rss := hwm()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr.String())
		}
		if rerr != nil {
			t.Fatalf("%v: output: %v", args, rerr)
		}
		t.Logf("%-40s %8s  max RSS %5.1f MiB", strings.Join(args, " "), time.Since(began).Round(100*time.Millisecond), float64(rss)/(1<<20))
		if rss >= maxRSS {
			t.Errorf("%v: max RSS %d MiB, want under %d MiB", args, rss>>20, maxRSS>>20)
		}
	}
	countLines := func(want int) func(io.Reader) error {
		return func(r io.Reader) error {
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			got := 0
			for sc.Scan() {
				got++
			}
			if err := sc.Err(); err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("%d lines, want %d", got, want)
			}
			return nil
		}
	}
	// countArray reads one JSON array of jobs, counting its elements by
	// its brackets (outside strings) and decoding the first: decoding
	// each of a million with encoding/json, in this test binary built
	// with the race detector, took most of the test's time (1m51s of
	// 4m26s), for nothing the count and the first job do not check.
	countArray := func(r io.Reader) error {
		buf := make([]byte, 1<<20)
		var first []byte
		depth, got := 0, 0
		inString, escaped, capturing, ended := false, false, false, false
		for {
			k, err := r.Read(buf)
			for _, c := range buf[:k] {
				switch {
				case ended:
					if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
						return fmt.Errorf("%q after the array", c)
					}
					continue
				case inString:
					switch {
					case escaped:
						escaped = false
					case c == '\\':
						escaped = true
					case c == '"':
						inString = false
					}
				case c == '"':
					inString = true
				case c == '[' || c == '{':
					if depth == 0 && c != '[' {
						return fmt.Errorf("not an array: starts with %q", c)
					}
					if depth == 1 {
						got++
						capturing = got == 1
					}
					depth++
				case c == ']' || c == '}':
					depth--
					if depth < 0 {
						return fmt.Errorf("unbalanced %q", c)
					}
					ended = depth == 0
				}
				if capturing {
					first = append(first, c)
					capturing = depth > 1
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
		if !ended {
			return fmt.Errorf("the array does not end (depth %d)", depth)
		}
		if got != n {
			return fmt.Errorf("%d jobs in the array, want %d", got, n)
		}
		var j struct {
			ID    int64  `json:"id"`
			State string `json:"state"`
		}
		if err := json.Unmarshal(first, &j); err != nil || j.ID == 0 || j.State == "" {
			return fmt.Errorf("the first job %s: %+v %v", first, j, err)
		}
		return nil
	}
	wantLine := func(line string) func(io.Reader) error {
		return func(r io.Reader) error {
			b, err := io.ReadAll(r)
			if err == nil && !strings.Contains(string(b), line) {
				err = fmt.Errorf("output %q, want a line %q", b, line)
			}
			return err
		}
	}
	runCmd(countLines(n), "jobs", "list", "--all", "--ndjson")
	runCmd(countArray, "jobs", "list", "--all", "--json")
	runCmd(wantLine("cancelled: "+strconv.Itoa(n)+"\n"), "jobs", "cancel", "--all")
	runCmd(wantLine("retried: "+strconv.Itoa(n)+"\n"), "jobs", "retry", "--all")
	runCmd(wantLine("deleted: "+strconv.Itoa(n)+"\n"), "jobs", "delete", "--all")
	var left int
	must(t, pool.QueryRow(context.WithoutCancel(ctx), `SELECT count(*) FROM pgqueue.jobs`).Scan(&left))
	if left != 0 {
		t.Fatalf("%d jobs left after delete --all", left)
	}
}

// watchPeakRSS samples the process's own high-water RSS (VmHWM in
// /proc/PID/status) every 10 ms; the function it returns stops and gives
// the highest seen, read last once its output has ended. The rusage of a
// reaped child cannot serve: Go starts children with vfork, and Linux
// counts the parent's peak RSS, the test's with its million seeded rows
// and -race, in the child's ru_maxrss (a /bin/true started by a process
// of 200 MiB reports 202 MiB).
func watchPeakRSS(pid int) func() int64 {
	path := fmt.Sprintf("/proc/%d/status", pid)
	var peak atomic.Int64
	sample := func() {
		b, err := os.ReadFile(path)
		if err != nil {
			return // gone, or not Linux
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
				if err == nil && kb<<10 > peak.Load() {
					peak.Store(kb << 10)
				}
			}
		}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			sample()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		sample()
		return peak.Load()
	}
}
