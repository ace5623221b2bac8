//go:build soak && unix

package integration_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/integration/proxy"
	"github.com/pgqueue/pgqueue/internal/pgserver"
)

// The soak run: every fault of the fault suite, at random, for a long
// time, while every feature runs; then every invariant in SQL. It is built
// only with the tag soak:
//
//	go test -tags soak -run TestSoak -timeout 45m -v ./integration/ -soak.duration 30m
//
// -soak.seed replays a run's choices (which fault, when, on whom; which
// jobs, cancels and pauses); the timing of the processes is not replayed.
// SOAK_LOG_DIR=<dir> keeps the workers' logs there.

var (
	soakDuration = flag.Duration("soak.duration", 3*time.Minute, "how long faults and load run before the drain and the checks")
	soakSeed     = flag.Uint64("soak.seed", 0, "seed of the run's random choices; 0 draws one (printed)")
	soakWorkers  = flag.Int("soak.workers", 4, "soakworker processes")
	soakFaultMin = flag.Duration("soak.fault-min", 4*time.Second, "least time between two faults")
	soakFaultMax = flag.Duration("soak.fault-max", 12*time.Second, "most time between two faults")
	soakRate     = flag.Int("soak.rate", 50, "jobs the driver enqueues per second")
)

const (
	soakLease     = 2 * time.Second
	soakRetention = 20 * time.Second
	soakDBName    = "soak"
	soakDriverApp = "soakdriver"
	// soakBacklog is the most unfinished jobs the driver lets wait: past
	// it, it skips batches (a long fault must not pile up work).
	soakBacklog = 2000
	// soakPausedQueue is the queue the driver pauses (soakworker's).
	soakPausedQueue = "soak-p"
)

// soakJobArgs matches soakworker's Args; kind is which of its kinds.
type soakJobArgs struct {
	kind    string
	Batch   int64  `json:"batch,omitempty"`
	N       int64  `json:"n,omitempty"`
	Fail    int    `json:"fail,omitempty"`
	Snooze  int    `json:"snooze,omitempty"`
	SlowMS  int    `json:"slow_ms,omitempty"`
	NoCheck bool   `json:"no_check,omitempty"`
	Key     string `json:"key,omitempty"`
}

func (a soakJobArgs) Kind() string { return a.kind }

// soakEnv is the soak run's world.
type soakEnv struct {
	t         *testing.T
	server    *pgserver.Server
	proxy     *proxy.Proxy
	direct    string // the database, straight to the server
	viaProxy  string // the database, through the proxy: the workers'
	db        *pgxpool.Pool
	client    *pgqueue.Client // the driver's: enqueues, cancels, pauses
	bin       string
	logDir    string
	retention time.Duration

	mu      sync.Mutex
	workers []*workerProc // live ones
	all     []*workerProc // every one started
	gens    map[int]int   // slot -> generation
	slots   map[*workerProc]int
}

func newSoakEnv(t *testing.T) *soakEnv {
	t.Helper()
	bin := buildBinary(t, "github.com/pgqueue/pgqueue/integration/soakworker")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	server, err := pgserver.Start(ctx, pgserver.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := server.Close(); err != nil {
			t.Error(err)
		}
	})
	admin, err := pgx.Connect(ctx, server.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.Exec(ctx, "CREATE DATABASE "+soakDBName)
	_ = admin.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := &soakEnv{t: t, server: server, direct: server.ConnString(soakDBName), bin: bin, retention: soakRetention,
		gens: map[int]int{}, slots: map[*workerProc]int{}, logDir: t.TempDir()}
	if dir := os.Getenv("SOAK_LOG_DIR"); dir != "" {
		// Keep the workers' logs after the run.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		e.logDir = dir
	}
	cfg, err := pgxpool.ParseConfig(e.direct)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 6
	cfg.ConnConfig.RuntimeParams["application_name"] = soakDriverApp
	// Seconds, not fewer: on a loaded machine (other packages' tests beside
	// this one) a new session of the private server took over 2 s to
	// start, and a check of the test's own failed the fault test with it.
	// A server that hangs is found by the waits' own deadlines.
	cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	if e.db, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.db.Close)
	if _, err := pgqueue.Migrate(ctx, e.db, pgqueue.SchemaDefault); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Exec(ctx, soakSchema); err != nil {
		t.Fatal(err)
	}
	// The driver's own client logs only what goes wrong: a pause every few
	// seconds is no news.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if e.client, err = pgqueue.New(e.db, &pgqueue.Config{Logger: logger}); err != nil {
		t.Fatal(err)
	}
	if e.proxy, err = proxy.New(fmt.Sprintf("127.0.0.1:%d", server.Port())); err != nil {
		t.Fatal(err)
	}
	// Registered before the workers' kills: runs after them.
	t.Cleanup(func() {
		if err := e.proxy.Close(); err != nil {
			t.Error(err)
		}
	})
	if e.viaProxy, err = e.proxy.ConnString(e.direct); err != nil {
		t.Fatal(err)
	}
	return e
}

// say prints a line to the test log and to stdout.
func (e *soakEnv) say(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	e.t.Log(line)
	fmt.Println(line)
}

// startWorker starts a soakworker in slot, named w<slot> (w<slot>g<n> for
// its n-th replacement), and returns it once ready. It may run outside the
// test's goroutine: it returns errors rather than failing the test.
func (e *soakEnv) startWorker(slot int) (*workerProc, error) {
	e.mu.Lock()
	e.gens[slot]++
	name := fmt.Sprintf("w%d", slot)
	if g := e.gens[slot]; g > 1 {
		name = fmt.Sprintf("w%dg%d", slot, g)
	}
	e.mu.Unlock()
	w := startWorkerProc(e.t, "soakworker", name, e.bin, filepath.Join(e.logDir, name+".log"),
		"-db", e.viaProxy, "-name", name, "-lease", soakLease.String(), "-retention", e.retention.String())
	e.mu.Lock()
	e.workers = append(e.workers, w)
	e.all = append(e.all, w)
	e.slots[w] = slot
	e.mu.Unlock()
	deadline := time.After(60 * time.Second)
	for !w.sawLine("ready", false) {
		select {
		case <-w.exited:
			return w, fmt.Errorf("%s exited (%v) before it was ready\n%s", name, w.waitErr, w.logTail())
		case <-deadline:
			return w, fmt.Errorf("%s not ready within a minute\n%s", name, w.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return w, nil
}

// live returns the live workers.
func (e *soakEnv) live() []*workerProc {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.workers)
}

// forget removes w from the live workers and returns its slot.
func (e *soakEnv) forget(w *workerProc) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.workers = slices.DeleteFunc(e.workers, func(x *workerProc) bool { return x == w })
	return e.slots[w]
}

func (e *soakEnv) count(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := e.db.QueryRow(ctx, query, args...).Scan(&n)
	return n, err
}

func (e *soakEnv) evidence(ctx context.Context, query string, args ...any) []string {
	rows, err := e.db.Query(ctx, query, args...)
	if err != nil {
		return []string{fmt.Sprintf("query failed: %v", err)}
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return []string{fmt.Sprintf("query failed: %v", err)}
	}
	return out
}

// dbNow reads the database clock.
func (e *soakEnv) dbNow(ctx context.Context) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var now time.Time
	err := e.db.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now)
	return now, err
}

// soakFigures counts what the driver did.
type soakFigures struct {
	batches, batchErrors, inserted, duplicates atomic.Int64
	skippedBacklog                             atomic.Int64
	cancelWaiting, cancelRunning, cancelFinal  atomic.Int64
	cancelErrors                               atomic.Int64
	pauses, pauseErrors                        atomic.Int64
	pausedFor                                  atomic.Int64 // nanoseconds inside recorded windows

	mu     sync.Mutex
	faults map[string]int64
	errs   map[string]string // last error by operation
	// terminated counts sessions ended by pg_terminate_backend.
	terminated atomic.Int64
	pauseWins  [][2]time.Time

	// CPU time (user + system) of the test process (driver, proxy) from
	// the start of the load to the workers' stop, and of the worker
	// processes over their lives.
	driverCPU, workerCPU time.Duration
}

// workersCPU returns the user plus system CPU time of every worker process
// that has exited.
func (e *soakEnv) workersCPU() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	var total time.Duration
	for _, w := range e.all {
		if st := w.cmd.ProcessState; st != nil {
			total += st.UserTime() + st.SystemTime()
		}
	}
	return total
}

// cpuTimes returns the user plus system CPU time getrusage reports for who.
func cpuTimes(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// lastError keeps the last error of each of the driver's operations, for
// the summary: the driver goes on through errors (the server restarts).
func (f *soakFigures) lastError(op string, err error) {
	f.mu.Lock()
	f.errs[op] = err.Error()
	f.mu.Unlock()
}

func (f *soakFigures) fault(kind string) {
	f.mu.Lock()
	f.faults[kind]++
	f.mu.Unlock()
}

// TestSoak runs the soak: see the top of this file.
func TestSoak(t *testing.T) {
	seed := *soakSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	e := newSoakEnv(t)
	e.say("SOAK seed=%d duration=%s workers=%d rate=%d/s faults every %s..%s (replay: -soak.seed %d)",
		seed, *soakDuration, *soakWorkers, *soakRate, *soakFaultMin, *soakFaultMax, seed)

	for slot := 1; slot <= *soakWorkers; slot++ {
		if _, err := e.startWorker(slot); err != nil {
			t.Fatal(err)
		}
	}

	f := &soakFigures{faults: map[string]int64{}, errs: map[string]string{}}
	loadBegan := time.Now()
	selfCPU0 := cpuTimes(syscall.RUSAGE_SELF)
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	run := func(name string, stream uint64, loop func(ctx context.Context, r *rand.Rand, f *soakFigures) error) {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, stream))
			if err := loop(ctx, r, f); err != nil && !errors.Is(err, context.Canceled) {
				errs <- fmt.Errorf("%s: %w", name, err)
				stop()
			}
		})
	}
	run("enqueuer", 1, e.enqueueLoop)
	run("canceller", 2, e.cancelLoop)
	run("pauser", 3, e.pauseLoop)
	run("faults", 4, e.faultLoop)

	select {
	case <-time.After(*soakDuration):
	case <-ctx.Done():
	}
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	loadEnded := time.Now()

	// Drain: no fault, every worker running, the queue resumed, no
	// periodic run any more; then every job must end.
	e.proxy.CutRandom(0)
	e.proxy.DropCommitReply(0)
	for _, w := range e.live() {
		_ = w.signal(syscall.SIGCONT)
	}
	e.retry(t.Context(), "resume "+soakPausedQueue, func(ctx context.Context) error { return e.client.QueueResume(ctx, soakPausedQueue) })
	for _, w := range e.live() {
		if err := w.signal(syscall.SIGUSR1); err != nil {
			t.Errorf("SIGUSR1 %s: %v", w.name, err)
		}
	}
	for _, w := range e.live() {
		w.waitLine(t, "periodic removed", 30*time.Second, false)
	}
	drained := e.waitDrained(5 * time.Minute)
	drainTook := time.Since(loadEnded)
	stopBegan := time.Now()
	last := e.live()
	for i, err := range stopProcs(last, 30*time.Second) {
		if err != nil {
			t.Errorf("graceful stop: %v\n%s", err, last[i].logTail())
		}
	}
	stopTook := time.Since(stopBegan)
	// Every worker has exited and been reaped. (RUSAGE_CHILDREN would
	// also count the postmasters the restarts stopped, with their
	// backends.)
	f.driverCPU = cpuTimes(syscall.RUSAGE_SELF) - selfCPU0
	f.workerCPU = e.workersCPU()

	checkCtx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f.mu.Lock()
	wins := slices.Clone(f.pauseWins)
	f.mu.Unlock()
	for _, w := range wins {
		if _, err := e.db.Exec(checkCtx, `INSERT INTO pauses (queue, paused_from, paused_to) VALUES ($1, $2, $3)`, soakPausedQueue, w[0], w[1]); err != nil {
			t.Fatal(err)
		}
	}
	checksBegan := time.Now()
	violations := e.soakCheck(checkCtx)
	checksTook := time.Since(checksBegan)
	e.summary(checkCtx, seed, f, loadEnded.Sub(loadBegan), drainTook, stopTook, checksTook, len(violations))
	if !drained {
		t.Error("not every job ended within 5 minutes of the drain")
	}
	if len(violations) > 0 {
		t.Errorf("invariants violated (seed %d):\n  %s", seed, strings.Join(violations, "\n  "))
	}
}

// retry calls op until it succeeds (the server may be restarting), up to
// a minute.
func (e *soakEnv) retry(ctx context.Context, what string, op func(ctx context.Context) error) {
	deadline := time.Now().Add(time.Minute)
	for {
		opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := op(opCtx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			e.t.Errorf("%s: %v", what, err)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitDrained waits until no job is left unfinished, and says so.
func (e *soakEnv) waitDrained(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(e.t.Context(), 5*time.Second)
		n, err := e.count(ctx, `SELECT count(*) FROM pgqueue.jobs WHERE state IN ('scheduled', 'available', 'running')`)
		cancel()
		if err == nil && n == 0 {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, line := range e.evidence(ctx, `
		SELECT format('job %s (%s, %s): %s, attempt %s, fence %s, lease_until %s (now %s), worker %s, run_at %s, key %s',
		              id, kind, queue, state, attempt, fence, lease_until, now(), worker_id, run_at, singleton_key)
		FROM pgqueue.jobs WHERE state IN ('scheduled', 'available', 'running') ORDER BY id LIMIT 20`) {
		e.t.Logf("unfinished: %s", line)
	}
	for _, w := range e.live() {
		e.t.Log(w.logTail())
	}
	return false
}

// enqueueLoop enqueues a batch every 200ms, in one transaction with its
// batches row: a mix of every kind of job the workers know.
func (e *soakEnv) enqueueLoop(ctx context.Context, r *rand.Rand, f *soakFigures) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	perBatch := max(1, *soakRate/5)
	var batch, n int64
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		backlog, err := e.count(opCtx, `SELECT count(*) FROM pgqueue.jobs WHERE state IN ('scheduled', 'available', 'running')`)
		if err == nil && backlog > soakBacklog {
			f.skippedBacklog.Add(1)
			cancel()
			continue
		}
		batch++
		params := make([]pgqueue.EnqueueManyParams, perBatch)
		for i := range params {
			n++
			params[i] = soakJob(r, batch, n)
		}
		err = pgx.BeginFunc(opCtx, e.db, func(tx pgx.Tx) error {
			res, err := e.client.EnqueueManyTx(opCtx, tx, params)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(opCtx, `INSERT INTO batches (id, inserted, duplicates) VALUES ($1, $2, $3)`, batch, res.Enqueued, len(res.Duplicates)); err != nil {
				return err
			}
			f.inserted.Add(res.Enqueued)
			f.duplicates.Add(int64(len(res.Duplicates)))
			return nil
		})
		cancel()
		if err != nil {
			f.batchErrors.Add(1)
			f.lastError("enqueue", err)
			continue
		}
		f.batches.Add(1)
	}
}

// soakJob draws one job of the mix.
func soakJob(r *rand.Rand, batch, n int64) pgqueue.EnqueueManyParams {
	a := soakJobArgs{kind: "soak", Batch: batch, N: n}
	opts := &pgqueue.EnqueueOpts{}
	switch p := r.IntN(100); {
	case p < 10: // singleton, transaction lock
		a.kind, a.Key = "soak_single_x", fmt.Sprintf("x%d", r.IntN(4))
		opts.SingletonKey = a.Key
		if r.IntN(5) == 0 {
			a.Fail = 1
		}
	case p < 20: // singleton, session lock
		a.kind, a.Key = "soak_single_s", fmt.Sprintf("s%d", r.IntN(4))
		opts.SingletonKey = a.Key
		if r.IntN(5) == 0 {
			a.Fail = 1
		}
	case p < 26: // unique: mostly duplicates of the live one
		a.kind, a.Key = "soak_unique", fmt.Sprintf("u%d", r.IntN(8))
		opts.Unique = &pgqueue.UniqueOpts{ByKey: a.Key}
	case p < 40: // the queue that is paused now and then
		opts.Queue = soakPausedQueue
	case p < 48:
		a.Fail = 1 + r.IntN(3)
	case p < 50: // fails until discarded
		a.Fail, opts.MaxAttempts = 5, 2
	case p < 58:
		a.Snooze = 1 + r.IntN(2)
	case p < 68: // a window for JobCancel while running
		a.SlowMS = 300 + r.IntN(1200)
		// Half of them rely on CompleteTx's fence alone: a holder paused
		// past its lease resumes while a newer holder is still in its wait.
		a.NoCheck = r.IntN(2) == 0
	case p < 76: // waits a while: JobCancel finds it waiting
		opts.RunAt = time.Now().Add(time.Duration(1000+r.IntN(4000)) * time.Millisecond)
	}
	return pgqueue.EnqueueManyParams{Args: a, Opts: opts}
}

// cancelLoop cancels a waiting job and a running one now and then.
func (e *soakEnv) cancelLoop(ctx context.Context, r *rand.Rand, f *soakFigures) error {
	for {
		if err := sleepCtx(ctx, time.Duration(300+r.IntN(900))*time.Millisecond); err != nil {
			return err
		}
		query := `SELECT id FROM pgqueue.jobs WHERE state IN ('scheduled', 'available') ORDER BY random() LIMIT 1`
		if r.IntN(2) == 0 {
			query = `SELECT id FROM pgqueue.jobs WHERE state = 'running' AND cancel_requested_at IS NULL
			         ORDER BY (args->>'slow_ms') IS NULL, random() LIMIT 1`
		}
		opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var id int64
		err := e.db.QueryRow(opCtx, query).Scan(&id)
		if err != nil {
			cancel()
			continue
		}
		job, err := e.client.JobCancel(opCtx, id)
		if err == nil {
			var requested, finalized *time.Time
			if !job.CancelRequestedAt.IsZero() {
				requested = &job.CancelRequestedAt
			}
			if !job.FinalizedAt.IsZero() {
				finalized = &job.FinalizedAt
			}
			_, err = e.db.Exec(opCtx, `INSERT INTO cancels (job_id, state, fence, requested_at, finalized_at) VALUES ($1, $2, $3, $4, $5)`,
				job.ID, string(job.State), job.Fence, requested, finalized)
			switch {
			case job.State == pgqueue.StateRunning:
				f.cancelRunning.Add(1)
			case job.State == pgqueue.StateCancelled && requested == nil:
				f.cancelWaiting.Add(1)
			default:
				f.cancelFinal.Add(1)
			}
		}
		cancel()
		if err != nil {
			f.cancelErrors.Add(1)
			f.lastError("cancel", err)
		}
	}
}

// pauseLoop pauses the queue soak-p for a second or a few, now and then,
// and keeps the windows inside which it was surely paused.
func (e *soakEnv) pauseLoop(ctx context.Context, r *rand.Rand, f *soakFigures) error {
	for {
		if err := sleepCtx(ctx, time.Duration(3000+r.IntN(8000))*time.Millisecond); err != nil {
			return err
		}
		hold := time.Duration(1000+r.IntN(3000)) * time.Millisecond
		opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := e.client.QueuePause(opCtx, soakPausedQueue)
		cancel()
		var from time.Time
		if err == nil {
			from, err = e.dbNow(ctx)
		}
		_ = sleepCtx(ctx, hold)
		var to time.Time
		if err == nil {
			to, err = e.dbNow(ctx)
		}
		// Resumed whatever happened: a pause whose outcome was unknown
		// may have committed.
		for {
			opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			rerr := e.client.QueueResume(opCtx, soakPausedQueue)
			cancel()
			if rerr == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			f.pauseErrors.Add(1)
			f.lastError("pause", err)
			continue
		}
		f.pauses.Add(1)
		f.pausedFor.Add(int64(to.Sub(from)))
		f.mu.Lock()
		f.pauseWins = append(f.pauseWins, [2]time.Time{from, to})
		f.mu.Unlock()
	}
}

// soakFaultKinds are the faults, with their weights.
var soakFaultKinds = []struct {
	name   string
	weight int
}{
	{"sigkill", 3},
	{"sigstop", 3},
	{"terminate", 3},
	{"proxy_cuts", 3},
	{"commit_reply_drops", 2},
	{"server_restart", 1},
}

// faultLoop injects one fault at a time, at random intervals.
func (e *soakEnv) faultLoop(ctx context.Context, r *rand.Rand, f *soakFigures) error {
	total := 0
	for _, k := range soakFaultKinds {
		total += k.weight
	}
	for {
		spread := *soakFaultMax - *soakFaultMin
		if err := sleepCtx(ctx, *soakFaultMin+time.Duration(r.Int64N(int64(spread)+1))); err != nil {
			return err
		}
		pick := r.IntN(total)
		kind := ""
		for _, k := range soakFaultKinds {
			if pick < k.weight {
				kind = k.name
				break
			}
			pick -= k.weight
		}
		live := e.live()
		victim := live[r.IntN(len(live))]
		window := time.Duration(2000+r.IntN(6000)) * time.Millisecond
		if err := e.inject(ctx, kind, victim, window, f); err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		f.fault(kind)
	}
}

// inject injects one fault and returns once it is over.
func (e *soakEnv) inject(ctx context.Context, kind string, victim *workerProc, window time.Duration, f *soakFigures) error {
	switch kind {
	case "sigkill":
		if err := victim.signal(syscall.SIGKILL); err != nil {
			return err
		}
		<-victim.exited
		slot := e.forget(victim)
		// A supervisor would start another one.
		_, err := e.startWorker(slot)
		return err
	case "sigstop":
		// Past the lease: its jobs are rescued and its writes refused when
		// it resumes.
		if err := victim.signal(syscall.SIGSTOP); err != nil {
			return err
		}
		_ = sleepCtx(context.WithoutCancel(ctx), soakLease+window/2)
		return victim.signal(syscall.SIGCONT)
	case "terminate":
		opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		n, err := e.count(opCtx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE application_name LIKE $1 AND random() < 0.5`, soakAppPrefix+"%")
		if err == nil {
			f.terminated.Add(n)
		}
		return nil // the server may be restarting: not the driver's failure
	case "proxy_cuts":
		e.proxy.CutRandom(0.15)
		_ = sleepCtx(context.WithoutCancel(ctx), window)
		e.proxy.CutRandom(0)
		return nil
	case "commit_reply_drops":
		e.proxy.DropCommitReply(0.05)
		_ = sleepCtx(context.WithoutCancel(ctx), window)
		e.proxy.DropCommitReply(0)
		return nil
	case "server_restart":
		opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := e.server.StopImmediate(opCtx); err != nil {
			return err
		}
		time.Sleep(time.Second)
		return e.server.Start(opCtx)
	}
	return fmt.Errorf("unknown fault %q", kind)
}

// summary prints the run's figures.
func (e *soakEnv) summary(ctx context.Context, seed uint64, f *soakFigures, load, drain, stop, checks time.Duration, violations int) {
	q := func(query string, args ...any) int64 {
		n, err := e.count(ctx, query, args...)
		if err != nil {
			e.t.Errorf("%s: %v", query, err)
		}
		return n
	}
	jobs := q(`SELECT count(*) FROM enqueued`)
	lost := jobs - q(`SELECT count(*) FROM jobs_all WHERE state IN ('completed', 'cancelled') OR (state = 'discarded' AND jsonb_array_length(errors) > 0)`)
	f.mu.Lock()
	faults := make([]string, 0, len(soakFaultKinds))
	var nfaults int64
	for _, k := range soakFaultKinds {
		faults = append(faults, fmt.Sprintf("%s=%d", k.name, f.faults[k.name]))
		nfaults += f.faults[k.name]
	}
	f.mu.Unlock()
	for _, op := range slices.Sorted(maps.Keys(f.errs)) {
		e.say("SOAK DRIVER last %s error: %s", op, f.errs[op])
	}
	ps := e.proxy.Stats()
	e.say("SOAK FAULTS total=%d %s | sessions_terminated=%d proxy_cuts=%d commit_replies_dropped=%d",
		nfaults, strings.Join(faults, " "), f.terminated.Load(), ps.Cuts, ps.CommitRepliesDropped)
	e.say("SOAK JOBS jobs=%d completed=%d cancelled=%d discarded=%d lost=%d | by kind: %s",
		jobs, q(`SELECT count(*) FROM jobs_all WHERE state = 'completed'`), q(`SELECT count(*) FROM jobs_all WHERE state = 'cancelled'`),
		q(`SELECT count(*) FROM jobs_all WHERE state = 'discarded'`), lost,
		strings.Join(e.evidence(ctx, `SELECT kind || '=' || count(*) FROM enqueued GROUP BY kind ORDER BY kind`), " "))
	e.say("SOAK FEATURES retried_jobs=%d planned_failures=%d rescued=%d snoozes=%d singleton_runs=%d unique_inserted=%d unique_duplicates=%d periodic_runs=%d cancels_waiting=%d cancels_running=%d (ended cancelled %d, completed %d) pauses=%d (paused %s, soak-p jobs enqueued while paused %d, claims in soak-p %d) pruned=%d",
		q(`SELECT count(*) FROM jobs_all WHERE attempt > 1`),
		q(`SELECT count(*) FROM jobs_all j, jsonb_array_elements(j.errors) x WHERE x->>'error' LIKE 'soak: planned failure%'`),
		q(`SELECT count(*) FROM jobs_all WHERE errors::text LIKE '%lease expired%'`),
		q(`SELECT count(*) FROM snoozes`), q(`SELECT count(*) FROM spans`),
		q(`SELECT count(*) FROM enqueued WHERE unique_key IS NOT NULL`), f.duplicates.Load(),
		q(`SELECT count(*) FROM periodic_inserts`),
		f.cancelWaiting.Load(), f.cancelRunning.Load(),
		q(`SELECT count(*) FROM cancels c JOIN jobs_all j ON j.id = c.job_id WHERE c.state = 'running' AND j.state = 'cancelled'`),
		q(`SELECT count(*) FROM cancels c JOIN jobs_all j ON j.id = c.job_id WHERE c.state = 'running' AND j.state = 'completed'`),
		f.pauses.Load(), time.Duration(f.pausedFor.Load()).Round(time.Second),
		q(`SELECT count(*) FROM enqueued e WHERE EXISTS (SELECT 1 FROM pauses p WHERE p.queue = e.queue AND e.at > p.paused_from AND e.at < p.paused_to)`),
		q(`SELECT count(*) FROM claims WHERE queue = $1 AND state = 'running'`, soakPausedQueue),
		q(`SELECT count(*) FROM pruned`))
	e.say("SOAK SUMMARY seed=%d duration=%s jobs=%d faults=%d stale_writes_refused=%d ambiguous_commits=%d (landed %d) claims=%d fences=%d..%d lost=%d violations=%d | driver: batches=%d failed=%d skipped_backlog=%d cancel_errors=%d pause_errors=%d | cpu: workers=%s driver+proxy=%s | drain=%s stop=%s checks=%s",
		seed, load.Round(time.Second), jobs, nfaults,
		q(`SELECT count(*) FROM refusals WHERE reason IN ('stale-fence', 'lease-lost')`),
		q(`SELECT count(*) FROM refusals WHERE reason = 'commit-unknown'`),
		q(`SELECT count(*) FROM refusals r WHERE reason = 'commit-unknown' AND EXISTS (SELECT 1 FROM effects e WHERE e.job_id = r.job_id AND e.fence = r.fence)`),
		q(`SELECT count(*) FROM claims`), q(`SELECT coalesce(min(fence), 0) FROM claims`), q(`SELECT coalesce(max(fence), 0) FROM claims`),
		lost, violations, f.batches.Load(), f.batchErrors.Load(), f.skippedBacklog.Load(), f.cancelErrors.Load(), f.pauseErrors.Load(),
		f.workerCPU.Round(time.Second), f.driverCPU.Round(time.Second),
		drain.Round(100*time.Millisecond), stop.Round(100*time.Millisecond), checks.Round(100*time.Millisecond))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
