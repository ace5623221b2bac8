package workerkit_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	dto "github.com/prometheus/client_model/go"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/integration/proxy"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

// bundle is a database of the test's own, a client on it and its URL.
type bundle struct {
	url    string
	pool   *pgxpool.Pool
	client *pgqueue.Client
}

func setup(t *testing.T) *bundle {
	t.Helper()
	url := pgtest.DB().NewDatabase(t)
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	client, err := pgqueue.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{url: url, pool: pool, client: client}
}

// jobState returns the job's state and attempt.
func (b *bundle) jobState(t *testing.T, id int64) (pgqueue.JobState, int) {
	t.Helper()
	job, err := b.client.JobGet(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return job.State, job.Attempt
}

// child is a running worker process.
type child struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string // stdout
	addr  string      // the HTTP listener's, once started

	mu     sync.Mutex
	stderr bytes.Buffer
	exited chan struct{}
	err    error
}

// startChild runs the test binary as the worker with args, and waits for
// it to have started (its "started" log line).
func startChild(t *testing.T, url string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1", "DATABASE_URL="+url)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{t: t, cmd: cmd, lines: make(chan string, 100), exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			c.stderr.WriteString(line + "\n")
			c.mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) != nil {
				continue
			}
			switch rec.Msg {
			case "kitworker: listening":
				c.mu.Lock()
				c.addr = rec.Addr
				c.mu.Unlock()
			case "kitworker: started":
				once.Do(func() { close(started) })
			}
		}
	}()
	go func() {
		readers.Wait()
		c.err = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			_ = cmd.Process.Kill()
			<-c.exited
		}
	})
	select {
	case <-started:
	case <-c.exited:
		t.Fatalf("worker exited before it started: %v\n%s", c.err, c.logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("worker did not start\n%s", c.logs())
	}
	return c
}

func (c *child) logs() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

func (c *child) signal(sig syscall.Signal) {
	c.t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		c.t.Fatal(err)
	}
}

// waitLine waits for the stdout line want.
func (c *child) waitLine(want string) {
	c.t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line := <-c.lines:
			if line == want {
				return
			}
		case <-timeout:
			c.t.Fatalf("no line %q\n%s", want, c.logs())
		}
	}
}

// wait waits for the process to exit within d and returns its exit code.
func (c *child) wait(d time.Duration) int {
	c.t.Helper()
	select {
	case <-c.exited:
	case <-time.After(d):
		c.t.Fatalf("worker still running after %v\n%s", d, c.logs())
	}
	return c.cmd.ProcessState.ExitCode()
}

// get returns the status and body of the worker's path.
func (c *child) get(path string) (int, string) {
	c.t.Helper()
	c.mu.Lock()
	addr := c.addr
	c.mu.Unlock()
	if addr == "" {
		c.t.Fatal("worker has no listener")
	}
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// waitStatus polls path until it answers status: the condition is the
// worker's, not a time.
func (c *child) waitStatus(path string, status int) string {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, body := c.get(path)
		if got == status {
			return body
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s answers %d %q, want %d\n%s", path, got, body, status, c.logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func enqueue(t *testing.T, b *bundle, args pgqueue.JobArgs, opts *pgqueue.EnqueueOpts) int64 {
	t.Helper()
	res, err := b.client.Enqueue(t.Context(), args, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

func TestProcess(t *testing.T) {
	t.Parallel()

	t.Run("DrainsRunningJobsOnSIGTERM", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a worker process draining its running jobs on SIGTERM")
		b := setup(t)
		c := startChild(t, b.url, "--http-addr", "127.0.0.1:0", "--shutdown-timeout", "1m")
		if code, body := c.get("/healthz"); code != http.StatusOK || body != "ok\n" {
			t.Errorf("/healthz: %d %q", code, body)
		}
		c.waitStatus("/readyz", http.StatusOK)

		release := filepath.Join(t.TempDir(), "release")
		id := enqueue(t, b, blockArgs{File: release}, nil)
		c.waitLine(fmt.Sprintf("started %d", id))

		c.signal(syscall.SIGTERM)
		if body := c.waitStatus("/readyz", http.StatusServiceUnavailable); body != "draining\n" {
			t.Errorf("/readyz while draining: %q", body)
		}
		if code, _ := c.get("/healthz"); code != http.StatusOK {
			t.Errorf("/healthz while draining: %d", code)
		}
		// Still running: the drain waits for it.
		if state, _ := b.jobState(t, id); state != pgqueue.StateRunning {
			t.Fatalf("job %s while draining, want running", state)
		}
		if err := os.WriteFile(release, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if code := c.wait(30 * time.Second); code != 0 {
			t.Fatalf("exit code %d\n%s", code, c.logs())
		}
		if state, _ := b.jobState(t, id); state != pgqueue.StateCompleted {
			t.Errorf("job %s, want completed", state)
		}
		if !strings.Contains(c.logs(), "every running job finished") {
			t.Errorf("no clean-stop line:\n%s", c.logs())
		}
	})

	t.Run("CancelsAfterShutdownTimeout", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a worker process cancelling its jobs after the shutdown timeout")
		b := setup(t)
		c := startChild(t, b.url, "--shutdown-timeout", "300ms")
		id := enqueue(t, b, blockArgs{File: filepath.Join(t.TempDir(), "never")}, nil)
		c.waitLine(fmt.Sprintf("started %d", id))
		start := time.Now()
		c.signal(syscall.SIGTERM)
		if code := c.wait(30 * time.Second); code != 0 {
			t.Fatalf("exit code %d\n%s", code, c.logs())
		}
		if took := time.Since(start); took < 300*time.Millisecond {
			t.Errorf("stopped after %v, before the shutdown timeout", took)
		}
		// Handed back, its attempt given back.
		if state, attempt := b.jobState(t, id); state != pgqueue.StateAvailable || attempt != 0 {
			t.Errorf("job %s at attempt %d, want available at 0", state, attempt)
		}
		if !strings.Contains(c.logs(), "cancelled and handed back") {
			t.Errorf("no cancel line:\n%s", c.logs())
		}
	})

	t.Run("SecondSignalCancelsAtOnce", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a second signal cancelling a worker process's jobs at once")
		b := setup(t)
		c := startChild(t, b.url, "--http-addr", "127.0.0.1:0", "--shutdown-timeout", "10m")
		id := enqueue(t, b, blockArgs{File: filepath.Join(t.TempDir(), "never")}, nil)
		c.waitLine(fmt.Sprintf("started %d", id))
		c.signal(syscall.SIGTERM)
		c.waitStatus("/readyz", http.StatusServiceUnavailable)
		c.signal(syscall.SIGINT)
		// Far within the 10 minutes: the second signal cancelled the job.
		if code := c.wait(30 * time.Second); code != 0 {
			t.Fatalf("exit code %d\n%s", code, c.logs())
		}
		if state, attempt := b.jobState(t, id); state != pgqueue.StateAvailable || attempt != 0 {
			t.Errorf("job %s at attempt %d, want available at 0", state, attempt)
		}
		if !strings.Contains(c.logs(), "second signal") {
			t.Errorf("no second-signal line:\n%s", c.logs())
		}
	})

	t.Run("Metrics", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a worker process's metrics")
		b := setup(t)
		// A job waiting in another queue shows in the leader's backlog
		// gauges.
		enqueue(t, b, quickArgs{}, &pgqueue.EnqueueOpts{Queue: "later", RunAt: time.Now().Add(time.Hour)})
		c := startChild(t, b.url, "--http-addr", "127.0.0.1:0")
		const jobs = 5
		for range jobs {
			enqueue(t, b, quickArgs{}, nil)
		}
		// Results are counted once their write returned, and the leader
		// reads the queues every 100ms (childMain): wait for both.
		var families map[string]*dto.MetricFamily
		for deadline := time.Now().Add(30 * time.Second); ; {
			code, body := c.get("/metrics")
			if code != http.StatusOK {
				t.Fatalf("/metrics: %d\n%s", code, body)
			}
			families = parseMetrics(t, body)
			done, _ := value(families["pgqueue_jobs_completed_total"], map[string]string{"queue": "default", "kind": "quick"})
			later, _ := value(families["pgqueue_queue_jobs"], map[string]string{"queue": "later", "state": "scheduled"})
			if done == jobs && later == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("/metrics never showed %d completed jobs and the backlog of queue later:\n%s", jobs, body)
			}
			time.Sleep(20 * time.Millisecond) // polling a scrape target
		}
		checkSecondsHistogram(t, families, "pgqueue_job_duration_seconds", map[string]string{"queue": "default", "kind": "quick", "outcome": "completed"}, jobs)
		checkSecondsHistogram(t, families, "pgqueue_job_wait_seconds", map[string]string{"queue": "default", "kind": "quick"}, jobs)
		checkGauges(t, families, []gaugeWant{
			{"pgqueue_queue_jobs", map[string]string{"queue": "later", "state": "scheduled"}, 1},
			{"pgqueue_queue_jobs", map[string]string{"queue": "later", "state": "available"}, 0},
			{"pgqueue_queue_jobs", map[string]string{"queue": "later", "state": "running"}, 0},
			{"pgqueue_queue_oldest_available_age_seconds", map[string]string{"queue": "later"}, 0},
			{"pgqueue_queue_paused", map[string]string{"queue": "later"}, 0},
			{"pgqueue_jobs_running", nil, 0},
			{"pgqueue_worker_ready", nil, 1},
			{"pgqueue_worker_draining", nil, 0},
		})
		for _, name := range []string{"pgqueue_pool_connections", "pgqueue_pool_max_connections", "go_goroutines"} {
			if _, ok := value(families[name], nil); !ok {
				t.Errorf("no %s", name)
			}
		}
		if n, _ := value(families["pgqueue_claim_size"], map[string]string{"queue": "default"}); n < 1 {
			t.Errorf("pgqueue_claim_size{queue=default}: %v claims", n)
		}
		c.signal(syscall.SIGTERM)
		if code := c.wait(30 * time.Second); code != 0 {
			t.Fatalf("exit code %d\n%s", code, c.logs())
		}
	})

	t.Run("ReadyzFollowsTheDatabase", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cfg, err := pgx.ParseConfig(b.url)
		if err != nil {
			t.Fatal(err)
		}
		px, err := proxy.New(net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
		if err != nil {
			t.Fatal(err)
		}
		url, err := px.ConnString(b.url)
		if err != nil {
			t.Fatal(err)
		}
		c := startChild(t, url, "--http-addr", "127.0.0.1:0", "--connect-timeout", "1s", "--shutdown-timeout", "1s")
		c.waitStatus("/readyz", http.StatusOK)
		// The database goes away: no new connection, every open one cut.
		if err := px.Close(); err != nil {
			t.Fatal(err)
		}
		if body := c.waitStatus("/readyz", http.StatusServiceUnavailable); !strings.HasPrefix(body, "database unreachable") {
			t.Errorf("/readyz: %q", body)
		}
		if code, _ := c.get("/healthz"); code != http.StatusOK {
			t.Errorf("/healthz: %d, want 200: the process lives on", code)
		}
	})

	t.Run("FailedStartExitsOne", func(t *testing.T) {
		t.Parallel()
		cmd := exec.CommandContext(context.Background(), os.Args[0], "--connect-timeout", "5s")
		cmd.Env = append(os.Environ(), childEnv+"=1", "DATABASE_URL=postgres://postgres@127.0.0.1:1/postgres")
		out, err := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 1 {
			t.Fatalf("exit code %d (%v), want 1:\n%s", code, err, out)
		}
		if !strings.Contains(string(out), "database unreachable") || !strings.Contains(string(out), `"level":"ERROR"`) {
			t.Errorf("output:\n%s", out)
		}
	})
}
