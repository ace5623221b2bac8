package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

func TestMain(m *testing.M) {
	os.Exit(pgtest.Main(m, func(ctx context.Context, connString string) error {
		pool, err := pgxpool.New(ctx, connString)
		if err != nil {
			return err
		}
		defer pool.Close()
		_, err = pgqueue.Migrate(ctx, pool, pgqueue.SchemaDefault)
		return err
	}))
}

// proc is a running copy of the example.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   atomic.Pointer[string]
	logs   strings.Builder
	logsMu sync.Mutex
	exited chan struct{}
}

func (p *proc) logText() string {
	p.logsMu.Lock()
	defer p.logsMu.Unlock()
	return p.logs.String()
}

// startCopy runs the example binary and waits for it to have started.
func startCopy(t *testing.T, bin, url, outbox string) *proc {
	t.Helper()
	cmd := exec.Command(bin, "--http-addr", "127.0.0.1:0", "--job-lease", "2s", "--shutdown-timeout", "20s",
		"--queues", "default=100,email=5", "--provider-latency", "100ms", "--summary-every", "1s", "--outbox", outbox)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+url, "PGQUEUE_LOG_FORMAT=json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, exited: make(chan struct{})}
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			p.logsMu.Lock()
			p.logs.WriteString(line + "\n")
			p.logsMu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) != nil {
				continue
			}
			switch rec.Msg {
			case "example-worker: listening":
				p.addr.Store(&rec.Addr)
			case "example-worker: started":
				once.Do(func() { close(started) })
			}
		}
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	select {
	case <-started:
	case <-p.exited:
		t.Fatalf("copy exited before it started:\n%s", p.logText())
	case <-time.After(60 * time.Second):
		t.Fatalf("copy did not start:\n%s", p.logText())
	}
	return p
}

func (p *proc) readyz() (int, string) {
	resp, err := http.Get("http://" + *p.addr.Load() + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
	return resp.StatusCode, b.String()
}

// count runs a count query.
func count(t *testing.T, pool *pgxpool.Pool, sql string) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(t.Context(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls the count query until it reaches want.
func waitFor(t *testing.T, pool *pgxpool.Pool, sql string, want int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n := count(t, pool, sql)
		if n >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d after %v, want %d", sql, n, within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSurvivesStopAndKill runs two copies, enqueues 10,000 charges and 100
// emails, SIGTERMs one copy and SIGKILLs the other mid-run, starts a
// third: every job completes, each charge's payment is written exactly
// once, and the SIGTERMed copy drains (its /readyz not ready) and exits 0
// within its shutdown timeout.
func TestSurvivesStopAndKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three processes and 10,000 jobs")
	}
	const charges, emails = 10_000, 100
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

	bin := filepath.Join(t.TempDir(), "worker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	outbox := t.TempDir()
	// Each copy's pool is capped: three copies must fit the test server.
	copyURL := url + "&pool_max_conns=20"
	if !strings.Contains(url, "?") {
		copyURL = url + "?pool_max_conns=20"
	}
	a := startCopy(t, bin, copyURL, outbox)
	b := startCopy(t, bin, copyURL, outbox)

	params := make([]pgqueue.EnqueueManyParams, 0, charges+emails)
	for i := range charges {
		params = append(params, pgqueue.EnqueueManyParams{Args: ChargeOrderArgs{OrderID: int64(i + 1), AmountCents: 100}})
	}
	for i := range emails {
		params = append(params, pgqueue.EnqueueManyParams{Args: WelcomeEmailArgs{To: fmt.Sprintf("user%d@example.com", i), Name: "User"}})
	}
	if _, err := client.EnqueueMany(t.Context(), params); err != nil {
		t.Fatal(err)
	}
	waitFor(t, pool, "SELECT count(*) FROM shop.payments", 1000, time.Minute)

	// Watch a's readiness from before the signal until it exits.
	var sawDraining atomic.Bool
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		for {
			select {
			case <-a.exited:
				return
			default:
			}
			if code, body := a.readyz(); code == http.StatusServiceUnavailable && body == "draining\n" {
				sawDraining.Store(true)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	signalled := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c := startCopy(t, bin, copyURL, outbox)

	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the SIGTERMed copy still runs:\n%s", a.logText())
	}
	<-watching
	if took := time.Since(signalled); took > 20*time.Second {
		t.Errorf("the SIGTERMed copy took %v, over its 20s shutdown timeout", took)
	}
	if code := a.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the SIGTERMed copy exited %d:\n%s", code, a.logText())
	}
	if !sawDraining.Load() {
		t.Error("the SIGTERMed copy's /readyz never answered 503 draining")
	}
	if !strings.Contains(a.logText(), "every running job finished") {
		t.Errorf("the SIGTERMed copy did not drain cleanly:\n%s", a.logText())
	}

	// b's jobs come back after their 2s lease, through the rescuer.
	waitFor(t, pool, "SELECT count(*) FROM pgqueue.jobs WHERE state = 'completed' AND kind IN ('charge_order', 'welcome_email')", charges+emails, 3*time.Minute)

	// Exactly once: one payment per order, written by the claim that
	// completed the job.
	if n := count(t, pool, "SELECT count(*) FROM shop.payments"); n != charges {
		t.Errorf("%d payments, want %d", n, charges)
	}
	if n := count(t, pool, "SELECT count(DISTINCT order_id) FROM shop.payments"); n != charges {
		t.Errorf("%d orders paid, want %d", n, charges)
	}
	if n := count(t, pool, `SELECT count(*) FROM shop.payments p JOIN pgqueue.jobs j
		ON j.id = p.job_id AND j.fence = p.fence AND j.state = 'completed'`); n != charges {
		t.Errorf("%d payments match their job's completing claim, want %d", n, charges)
	}
	files, err := filepath.Glob(filepath.Join(outbox, "*.eml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != emails {
		t.Errorf("%d emails in the outbox, want %d", len(files), emails)
	}
	// The periodic job ran, its runs written once per instant.
	waitFor(t, pool, "SELECT count(*) FROM shop.summaries", 1, 30*time.Second)

	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the third copy did not stop")
	}
	if code := c.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the third copy exited %d", code)
	}
}
