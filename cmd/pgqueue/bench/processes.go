package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// The child's protocol, one line each way: the child says childReady once
// its client is built, the parent says childGo to all at once, the child
// reports "written N" (results written so far) as they grow, the parent
// says childStop once the children's sum reaches the job count, and the
// child reports "result <Usage as JSON>" after its client stopped. A closed
// stdin stops a child too, so none outlives its parent.
const (
	childReady   = "ready"
	childGo      = "go"
	childStop    = "stop"
	childWritten = "written "
	childResult  = "result "
)

// childEvery is how often a child reports its written results.
const childEvery = 10 * time.Millisecond

// ChildCommand returns the command that runs RunChild with args in a new
// process, with the database URL it is to use; BurnDownProcesses starts
// one per child.
type ChildCommand func(ctx context.Context, args []string) *exec.Cmd

// BurnDownProcesses works the enqueued jobs with cfg.Processes child
// processes, each a client with cfg.Workers workers on a pool of
// cfg.PoolConns connections, all on the same queue. It starts them, waits
// until every one has built its client, tells them all to start, and times
// until the results of cfg.Jobs jobs are written. Client CPU is the sum of
// the children's own, from their start to their Stop; the server's is
// their backends' (they carry one application_name).
func BurnDownProcesses(ctx context.Context, cfg *Config, command ChildCommand) (res Result, err error) {
	n := max(cfg.Processes, 1)
	app := runApp()
	server, err := startServerCPU(ctx, cfg, app)
	if err != nil {
		return Result{}, err
	}
	defer server.close()

	args := []string{"--schema", cfg.schema(), "--workers", strconv.Itoa(cfg.Workers), "--app", app}
	if cfg.PoolConns > 0 {
		args = append(args, "--pool-conns", strconv.Itoa(cfg.PoolConns))
	}
	if cfg.ClaimAhead != 0 {
		args = append(args, "--claim-ahead", cfg.ClaimAhead.String())
	}
	if cfg.JobDuration > 0 {
		args = append(args, "--job-duration", cfg.JobDuration.String())
	}
	type event struct {
		child   int
		ready   bool
		written int64
		usage   *Usage
		err     error // the child's output ended
	}
	events := make(chan event)
	children := make([]*exec.Cmd, n)
	stdins := make([]io.WriteCloser, n)
	stderrs := make([]*strings.Builder, n)
	var readers sync.WaitGroup
	childCtx, cancel := context.WithCancel(ctx)
	defer func() {
		if err != nil {
			cancel() // kills the children (command uses the context)
		}
		// Otherwise each has reported its result and exits on its own.
		for i, c := range children {
			if c == nil {
				continue
			}
			_ = stdins[i].Close()
			if werr := c.Wait(); werr != nil && err == nil {
				err = fmt.Errorf("child %d: %w: %s", i, werr, strings.TrimSpace(stderrs[i].String()))
			}
		}
		cancel()
		readers.Wait()
	}()
	for i := range n {
		c := command(childCtx, args)
		stderrs[i] = &strings.Builder{}
		c.Stderr = &lockedWriter{w: stderrs[i]}
		if stdins[i], err = c.StdinPipe(); err != nil {
			return Result{}, err
		}
		stdout, err := c.StdoutPipe()
		if err != nil {
			return Result{}, err
		}
		if err := c.Start(); err != nil {
			return Result{}, fmt.Errorf("start child: %w", err)
		}
		children[i] = c
		readers.Add(1)
		go func() {
			defer readers.Done()
			send := func(e event) bool {
				select {
				case events <- e:
					return true
				case <-childCtx.Done():
					return false
				}
			}
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				line := sc.Text()
				e := event{child: i}
				switch {
				case line == childReady:
					e.ready = true
				case strings.HasPrefix(line, childWritten):
					e.written, _ = strconv.ParseInt(strings.TrimPrefix(line, childWritten), 10, 64)
				case strings.HasPrefix(line, childResult):
					var u Usage
					if err := json.Unmarshal([]byte(strings.TrimPrefix(line, childResult)), &u); err != nil {
						e.err = fmt.Errorf("child %d: result: %w", i, err)
					} else {
						e.usage = &u
					}
				default:
					continue
				}
				if !send(e) {
					return
				}
			}
			_ = send(event{child: i, err: fmt.Errorf("child %d ended", i)})
		}()
	}
	childErr := func(e event) error {
		// Its stderr is complete once it exited: wait for that, briefly.
		werr := children[e.child].Wait()
		children[e.child] = nil
		return fmt.Errorf("%w (%v): %s", e.err, werr, strings.TrimSpace(stderrs[e.child].String()))
	}
	tell := func(word string) error {
		for i, w := range stdins {
			if children[i] == nil {
				continue
			}
			if _, err := io.WriteString(w, word+"\n"); err != nil {
				return fmt.Errorf("child %d: %w", i, err)
			}
		}
		return nil
	}
	reported := make([]bool, n)
	wait := func(until func() bool, handle func(event) error) error {
		for !until() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case e := <-events:
				if e.err != nil && !reported[e.child] {
					return childErr(e)
				}
				if e.err != nil {
					continue // its output ends after its result
				}
				if err := handle(e); err != nil {
					return err
				}
			}
		}
		return nil
	}

	ready := 0
	if err := wait(func() bool { return ready == n }, func(e event) error {
		if e.ready {
			ready++
		}
		return nil
	}); err != nil {
		return Result{}, err
	}

	written := make([]int64, n)
	var sum atomic.Int64
	total := int64(cfg.Jobs)
	stopProgress := progress(cfg, fmt.Sprintf("burn-down, %d processes", n), sum.Load, total)
	server.mark()
	start := time.Now()
	if err := tell(childGo); err != nil {
		stopProgress()
		return Result{}, err
	}
	until := func() bool { return sum.Load() >= total }
	if cfg.StopAfter > 0 {
		// The children report every childEvery: a tick checks the time
		// between their reports.
		stopAt := start.Add(cfg.StopAfter)
		tick := time.NewTicker(childEvery)
		defer tick.Stop()
		go func() {
			for {
				select {
				case <-childCtx.Done():
					return
				case <-tick.C:
					if !time.Now().Before(stopAt) {
						select {
						case events <- event{child: -1}:
						case <-childCtx.Done():
						}
						return
					}
				}
			}
		}()
		until = func() bool { return sum.Load() >= total || !time.Now().Before(stopAt) }
	}
	err = wait(until, func(e event) error {
		if e.child < 0 {
			return nil // the time is up: until says so
		}
		if e.usage != nil {
			return fmt.Errorf("child %d stopped before the jobs were done", e.child)
		}
		sum.Add(e.written - written[e.child])
		written[e.child] = e.written
		return nil
	})
	elapsed := time.Since(start)
	stopProgress()
	if err != nil {
		return Result{}, err
	}
	if err := tell(childStop); err != nil {
		return Result{}, err
	}
	var usage Usage
	results := 0
	if err := wait(func() bool { return results == n }, func(e event) error {
		if e.usage != nil && !reported[e.child] {
			reported[e.child] = true
			usage = usage.add(*e.usage)
			results++
		}
		return nil
	}); err != nil {
		return Result{}, err
	}
	if beforeServerRead != nil {
		beforeServerRead()
	}
	usage.ServerMeasured, usage.ServerCPU, usage.Background = server.read(ctx)
	usage.ServerBackends = server.backends()
	return Result{Mode: fmt.Sprintf("%dx%d", n, cfg.Workers), Jobs: sum.Load(), Elapsed: elapsed, Usage: usage}, nil
}

// beforeServerRead, when a test sets it, runs between the children's
// results and the read of their backends' CPU: the window in which a child
// that closed its pool on its own lost its backends' CPU.
var beforeServerRead func()

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// RunChild is a child process of BurnDownProcesses: args are the flags it
// was given, databaseURL the database, in and out its end of the protocol
// (its stdin and stdout).
func RunChild(ctx context.Context, args []string, databaseURL string, in io.Reader, out io.Writer) error {
	fs := flag.NewFlagSet("bench child", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg := &Config{}
	var app string
	fs.StringVar(&cfg.Schema, "schema", "", "")
	fs.IntVar(&cfg.Workers, "workers", 0, "")
	fs.IntVar(&cfg.PoolConns, "pool-conns", 0, "")
	fs.DurationVar(&cfg.ClaimAhead, "claim-ahead", 0, "")
	fs.DurationVar(&cfg.JobDuration, "job-duration", 0, "")
	fs.StringVar(&app, "app", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.Workers < 1 || app == "" || databaseURL == "" {
		return errors.New("bench child: --workers, --app and a database URL are required")
	}
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	cfg.Pool = pool
	m, err := newMeter(ctx, cfg, app, false)
	if err != nil {
		return err
	}
	defer m.close()
	client, err := noopClient(cfg, m, func(*pgqueue.Job[noopArgs]) {
		if cfg.JobDuration > 0 {
			time.Sleep(cfg.JobDuration)
		}
	})
	if err != nil {
		return err
	}
	lines := bufio.NewScanner(in)
	say := func(s string) error {
		_, err := io.WriteString(out, s+"\n")
		return err
	}
	if err := say(childReady); err != nil {
		return err
	}
	if !lines.Scan() || lines.Text() != childGo {
		return nil // the parent gave up
	}
	if err := m.start(ctx); err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(childEvery)
		defer t.Stop()
		var last int64
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				if n := m.written.Load(); n != last {
					last = n
					if say(childWritten+strconv.FormatInt(n, 10)) != nil {
						return
					}
				}
			}
		}
	}()
	lines.Scan() // childStop, or the parent's end
	close(quit)
	<-done
	stopErr := client.Stop(context.WithoutCancel(ctx))
	u := m.stop(ctx)
	b, err := json.Marshal(u)
	if err != nil {
		return err
	}
	if err := say(childResult + string(b)); err != nil {
		return err
	}
	// Keep the pool's backends until the parent's end (stdin closed): the
	// parent reads their CPU after every result, and a backend that exited
	// before that read would lose what it used since the sample before.
	for lines.Scan() {
	}
	return stopErr
}
