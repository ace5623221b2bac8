package pgqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testlog"
)

// insertRecorder is an enqueue middleware that stamps every job's meta and
// tags and keeps what it saw of each call.
type insertRecorder struct {
	mu    sync.Mutex
	calls []insertCall
}

type insertCall struct {
	kinds []string
	res   *pgqueue.EnqueuedJobs
	err   error
}

func (r *insertRecorder) Enqueue(ctx context.Context, jobs []*pgqueue.EnqueueParams, next func(context.Context) (*pgqueue.EnqueuedJobs, error)) error {
	call := insertCall{}
	for _, j := range jobs {
		call.kinds = append(call.kinds, j.Kind)
		if j.Meta == nil {
			j.Meta = map[string]any{}
		}
		j.Meta["stamp"] = "mw"
		j.Tags = append(j.Tags, "mw")
	}
	call.res, call.err = next(ctx)
	r.mu.Lock()
	r.calls = append(r.calls, call)
	r.mu.Unlock()
	return call.err
}

// last returns the last call seen and how many there were.
func (r *insertRecorder) last(t *testing.T) (insertCall, int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) == 0 {
		t.Fatal("enqueue middleware not called")
	}
	return r.calls[len(r.calls)-1], len(r.calls)
}

// unstamped counts the jobs of kind whose meta or tags lack the stamp.
func unstamped(t *testing.T, pool *pgxpool.Pool, kind string) int {
	t.Helper()
	return countJobs(t, pool, "kind = $1 AND NOT (meta->>'stamp' = 'mw' AND 'mw' = ANY (tags))", kind)
}

// TestInsertMiddleware checks that enqueue middleware wraps every insert
// path, may change the jobs, and sees what was inserted.
func TestInsertMiddleware(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("WrapsEveryInsertPath", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		rec := &insertRecorder{}
		c := newClient(t, pool, &pgqueue.Config{EnqueueMiddleware: []pgqueue.EnqueueMiddleware{rec}})
		n := 0

		// Enqueue.
		res, err := c.Enqueue(ctx, noteArgs{N: 1}, nil)
		must(t, err)
		call, calls := rec.last(t)
		n++
		if calls != n || call.err != nil || len(call.res.Rows) != 1 || call.res.Rows[0].ID != res.ID || call.res.Enqueued != 1 || !slices.Equal(call.kinds, []string{"note"}) {
			t.Fatalf("Enqueue: middleware saw %+v (call %d)", call, calls)
		}
		if string(res.Meta) == "" || !strings.Contains(string(res.Meta), `"stamp": "mw"`) || !slices.Contains(res.Tags, "mw") {
			t.Fatalf("Enqueue returned meta %s tags %q", res.Meta, res.Tags)
		}

		// EnqueueTx.
		tx, err := pool.Begin(ctx)
		must(t, err)
		_, err = c.EnqueueTx(ctx, tx, noteArgs{N: 2}, &pgqueue.EnqueueOpts{Tags: []string{"own"}})
		must(t, err)
		must(t, tx.Commit(ctx))
		n++
		if call, calls = rec.last(t); calls != n || call.res.Enqueued != 1 {
			t.Fatalf("EnqueueTx: middleware saw %+v (call %d)", call, calls)
		}

		// A unique job, then its duplicate: the middleware sees which.
		uniq := &pgqueue.EnqueueOpts{Unique: &pgqueue.UniqueOpts{ByKey: "k"}}
		first, err := c.Enqueue(ctx, emailArgs{To: "a"}, uniq)
		must(t, err)
		dup, err := c.Enqueue(ctx, emailArgs{To: "b"}, uniq)
		must(t, err)
		n += 2
		call, calls = rec.last(t)
		if !dup.Duplicate || dup.ID != first.ID || calls != n || call.res.Enqueued != 0 ||
			!slices.Equal(call.res.Duplicates, []int{0}) || call.res.Rows[0].ID != first.ID {
			t.Fatalf("unique duplicate: result %+v, middleware saw %+v", dup, call.res)
		}

		// EnqueueMany in one statement, with a unique job and its duplicate.
		many, err := c.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
			{Args: noteArgs{N: 3}},
			{Args: emailArgs{To: "c"}, Opts: uniq},
			{Args: noteArgs{N: 4}, Opts: &pgqueue.EnqueueOpts{Meta: map[string]any{"own": 1}}},
		})
		must(t, err)
		n++
		call, calls = rec.last(t)
		if calls != n || call.res.Enqueued != 2 || !slices.Equal(call.res.Duplicates, []int{1}) || call.res.Rows != nil ||
			many.Enqueued != 2 || !slices.Equal(many.Duplicates, []int{1}) || len(call.kinds) != 3 {
			t.Fatalf("EnqueueMany unique: result %+v, middleware saw %+v", many, call)
		}
		// ... without unique jobs.
		_, err = c.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{{Args: noteArgs{N: 5}}, {Args: noteArgs{N: 6}}})
		must(t, err)
		n++
		if call, calls = rec.last(t); calls != n || call.res.Enqueued != 2 {
			t.Fatalf("EnqueueMany: middleware saw %+v", call.res)
		}

		// EnqueueManyTx through COPY, some jobs scheduled.
		params := make([]pgqueue.EnqueueManyParams, pgqueue.CopyThreshold+6)
		for i := range params {
			params[i] = pgqueue.EnqueueManyParams{Args: chargeArgs{Order: i}}
			if i%10 == 0 {
				params[i].Opts = &pgqueue.EnqueueOpts{RunAt: time.Now().Add(time.Hour)}
			}
		}
		tx, err = pool.Begin(ctx)
		must(t, err)
		copied, err := c.EnqueueManyTx(ctx, tx, params)
		must(t, err)
		must(t, tx.Commit(ctx))
		n++
		call, calls = rec.last(t)
		if calls != n || call.res.Enqueued != int64(len(params)) || copied.Enqueued != int64(len(params)) || len(call.kinds) != len(params) {
			t.Fatalf("COPY: result %+v, middleware saw %+v", copied, call.res)
		}
		if s := countJobs(t, pool, "kind = 'charge' AND state = 'scheduled'"); s != 7 {
			t.Fatalf("COPY wrote %d scheduled jobs, want 7", s)
		}

		for _, kind := range []string{"note", "email", "charge"} {
			if bad := unstamped(t, pool, kind); bad != 0 {
				t.Fatalf("%d %s jobs without the middleware's meta and tag", bad, kind)
			}
		}
		// The middleware's stamp joins the caller's own meta and tags.
		if own := countJobs(t, pool, "(meta->>'own' = '1' OR 'own' = ANY (tags)) AND meta->>'stamp' = 'mw'"); own != 2 {
			t.Fatalf("%d jobs kept their own meta or tags beside the stamp, want 2", own)
		}
	})

	t.Run("WrapsPeriodicRuns", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "insert middleware around the periodic runs the leader enqueues")
		pool := newPool(t)
		rec := &insertRecorder{}
		job := noteJob("every-hour", pgqueue.EverySchedule(time.Hour), &pgqueue.PeriodicJobOpts{RunOnStart: true})
		// The client works another queue: the run stays to be read.
		startClient(t, pool, noteWorkers(t), &pgqueue.Config{
			Queues:            map[string]pgqueue.QueueConfig{"elsewhere": {MaxWorkers: 1}},
			PeriodicJobs:      []*pgqueue.PeriodicJob{job},
			EnqueueMiddleware: []pgqueue.EnqueueMiddleware{rec},
		})
		waitFor(t, "the run on start", func() bool { return countJobs(t, pool, "kind = 'note'") == 1 })
		if bad := unstamped(t, pool, "note"); bad != 0 {
			t.Fatal("periodic run without the middleware's meta and tag")
		}
		// The constructor's and the periodic mark's meta are kept.
		if n := countJobs(t, pool, "meta->>'own' = 'kept' AND meta->'periodic'->>'name' = 'every-hour'"); n != 1 {
			t.Fatal("periodic run lost its own meta")
		}
		call, _ := rec.last(t)
		if call.res == nil || call.res.Enqueued != 1 || len(call.res.Rows) != 1 {
			t.Fatalf("middleware saw %+v", call.res)
		}
	})

	t.Run("RunsInOrderWithTheContextPassedOn", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		var order []string
		type key struct{}
		mw := func(name string) pgqueue.EnqueueMiddleware {
			return pgqueue.EnqueueMiddlewareFunc(func(ctx context.Context, jobs []*pgqueue.EnqueueParams, next func(context.Context) (*pgqueue.EnqueuedJobs, error)) error {
				seen, _ := ctx.Value(key{}).(string)
				order = append(order, name+" in (ctx "+seen+")")
				_, err := next(context.WithValue(ctx, key{}, seen+name))
				order = append(order, name+" out")
				return err
			})
		}
		c := newClient(t, pool, &pgqueue.Config{EnqueueMiddleware: []pgqueue.EnqueueMiddleware{mw("a"), mw("b")}})
		_, err := c.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		want := []string{"a in (ctx )", "b in (ctx a)", "b out", "a out"}
		if !slices.Equal(order, want) {
			t.Fatalf("order %q, want %q", order, want)
		}
	})

	t.Run("ErrorFailsTheInsert", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		refuse := errors.New("refused")
		c := newClient(t, pool, &pgqueue.Config{EnqueueMiddleware: []pgqueue.EnqueueMiddleware{
			pgqueue.EnqueueMiddlewareFunc(func(ctx context.Context, jobs []*pgqueue.EnqueueParams, next func(context.Context) (*pgqueue.EnqueuedJobs, error)) error {
				return refuse
			}),
		}})
		if _, err := c.Enqueue(ctx, noteArgs{}, nil); !errors.Is(err, refuse) {
			t.Fatalf("Enqueue: %v, want the middleware's error", err)
		}
		if _, err := c.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{{Args: noteArgs{}}}); !errors.Is(err, refuse) {
			t.Fatalf("EnqueueMany: %v, want the middleware's error", err)
		}
		if n := countJobs(t, pool, "true"); n != 0 {
			t.Fatalf("%d jobs inserted", n)
		}
	})

	t.Run("SkippingNextIsErrNotInserted", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, &pgqueue.Config{EnqueueMiddleware: []pgqueue.EnqueueMiddleware{
			pgqueue.EnqueueMiddlewareFunc(func(ctx context.Context, jobs []*pgqueue.EnqueueParams, next func(context.Context) (*pgqueue.EnqueuedJobs, error)) error {
				return nil
			}),
		}})
		if _, err := c.Enqueue(ctx, noteArgs{}, nil); !errors.Is(err, pgqueue.ErrNotEnqueued) {
			t.Fatalf("Enqueue: %v, want ErrNotInserted", err)
		}
		if n := countJobs(t, pool, "true"); n != 0 {
			t.Fatalf("%d jobs inserted", n)
		}
	})

	t.Run("InsertErrorReachesCallerEvenIfSwallowed", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, &pgqueue.Config{EnqueueMiddleware: []pgqueue.EnqueueMiddleware{
			pgqueue.EnqueueMiddlewareFunc(func(ctx context.Context, jobs []*pgqueue.EnqueueParams, next func(context.Context) (*pgqueue.EnqueuedJobs, error)) error {
				jobs[0].Queue = "Not A Queue" // validated after the middleware
				_, _ = next(ctx)
				return nil
			}),
		}})
		if _, err := c.Enqueue(ctx, noteArgs{}, nil); !errors.Is(err, pgqueue.ErrInvalid) {
			t.Fatalf("Enqueue: %v, want ErrInvalid", err)
		}
	})

	t.Run("CallersOptionsAreNotChanged", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, &pgqueue.Config{EnqueueMiddleware: []pgqueue.EnqueueMiddleware{&insertRecorder{}}})
		opts := &pgqueue.EnqueueOpts{Tags: make([]string, 1, 4), Meta: map[string]any{"own": true}}
		opts.Tags[0] = "own"
		_, err := c.Enqueue(ctx, noteArgs{}, opts)
		must(t, err)
		if !maps.Equal(opts.Meta, map[string]any{"own": true}) || !slices.Equal(opts.Tags[:cap(opts.Tags)][:2], []string{"own", ""}) {
			t.Fatalf("caller's options changed: meta %v tags %q", opts.Meta, opts.Tags[:2])
		}
	})
}

// ctxKey is a context key of the work middleware tests.
type ctxKey string

// TestWorkMiddleware checks the order of work middleware, the values it
// passes to the handler, and what it sees of the handler's outcome.
func TestWorkMiddleware(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// tracer appends name's entry and exit to log and adds name to the
	// context's trail.
	tracer := func(name string, log *[]string, mu *sync.Mutex) pgqueue.WorkMiddleware {
		return pgqueue.WorkMiddlewareFunc(func(ctx context.Context, job *pgqueue.JobRow, next func(context.Context) error) error {
			trail, _ := ctx.Value(ctxKey("trail")).(string)
			mu.Lock()
			*log = append(*log, name+" in")
			mu.Unlock()
			err := next(context.WithValue(ctx, ctxKey("trail"), trail+name))
			mu.Lock()
			*log = append(*log, fmt.Sprintf("%s out %v", name, err))
			mu.Unlock()
			return err
		})
	}

	t.Run("ConfigOutsideWorkerWithContextValues", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "work middleware from Config, outside the worker's, passing context values")
		pool := newPool(t)
		var mu sync.Mutex
		var log []string
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			trail, _ := ctx.Value(ctxKey("trail")).(string)
			mu.Lock()
			log = append(log, "handler "+trail)
			mu.Unlock()
			if pgqueue.ClientFromContext(ctx) == nil {
				return errors.New("no client in the handler's context")
			}
			return nil
		}, &pgqueue.WorkerOpts{Middleware: []pgqueue.WorkMiddleware{tracer("c", &log, &mu)}}))
		b := startClient(t, pool, ws, &pgqueue.Config{WorkMiddleware: []pgqueue.WorkMiddleware{tracer("a", &log, &mu), tracer("b", &log, &mu)}})
		res, err := b.client.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		waitState(t, pool, res.ID, "completed")
		mu.Lock()
		defer mu.Unlock()
		want := []string{"a in", "b in", "c in", "handler abc", "c out <nil>", "b out <nil>", "a out <nil>"}
		if !slices.Equal(log, want) {
			t.Fatalf("log %q, want %q", log, want)
		}
	})

	t.Run("OutcomeIsWhatTheMiddlewareReturns", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "the job's outcome taken from what work middleware returns")
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			return fmt.Errorf("handler failed %d", job.Args.N)
		}, nil))
		seen := make(chan error, 2)
		b := startClient(t, pool, ws, &pgqueue.Config{WorkMiddleware: []pgqueue.WorkMiddleware{
			pgqueue.WorkMiddlewareFunc(func(ctx context.Context, job *pgqueue.JobRow, next func(context.Context) error) error {
				err := next(ctx)
				seen <- err
				var args noteArgs
				if json.Unmarshal(job.EncodedArgs, &args) == nil && args.N == 1 {
					return pgqueue.JobCancel(fmt.Errorf("middleware cancelled: %w", err))
				}
				return nil // forgives the failure
			}),
		}})
		forgiven, err := b.client.Enqueue(ctx, noteArgs{N: 2}, nil)
		must(t, err)
		cancelled, err := b.client.Enqueue(ctx, noteArgs{N: 1}, nil)
		must(t, err)
		waitState(t, pool, forgiven.ID, "completed")
		s := waitState(t, pool, cancelled.ID, "cancelled")
		if !slices.Equal(s.errors, []string{"middleware cancelled: handler failed 1"}) {
			t.Fatalf("errors %q", s.errors)
		}
		for range 2 {
			if err := <-seen; err == nil || !strings.HasPrefix(err.Error(), "handler failed") {
				t.Fatalf("middleware saw %v, want the handler's error", err)
			}
		}
	})

	t.Run("HandlerPanicReachesMiddlewareAsPanicError", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a handler's panic reaching work middleware as a PanicError")
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			panic("handler exploded")
		}, nil))
		seen := make(chan error, 1)
		b := startClient(t, pool, ws, &pgqueue.Config{WorkMiddleware: []pgqueue.WorkMiddleware{
			pgqueue.WorkMiddlewareFunc(func(ctx context.Context, job *pgqueue.JobRow, next func(context.Context) error) error {
				err := next(ctx)
				seen <- err
				return err
			}),
		}})
		res, err := b.client.Enqueue(ctx, noteArgs{}, &pgqueue.EnqueueOpts{MaxAttempts: 1})
		must(t, err)
		s := waitState(t, pool, res.ID, "discarded")
		var pe *pgqueue.PanicError
		if err := <-seen; !errors.As(err, &pe) || pe.Value != "handler exploded" || !strings.Contains(pe.Stack, "middleware_test.go") {
			t.Fatalf("middleware saw %v", err)
		}
		if !slices.Equal(s.errors, []string{"panic: handler exploded"}) || !strings.Contains(s.traces[0], "middleware_test.go") {
			t.Fatalf("errors %q traces %q", s.errors, s.traces)
		}
	})

	t.Run("MiddlewarePanicFailsTheAttemptWithStack", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error { return nil },
			&pgqueue.WorkerOpts{Middleware: []pgqueue.WorkMiddleware{
				pgqueue.WorkMiddlewareFunc(func(ctx context.Context, job *pgqueue.JobRow, next func(context.Context) error) error {
					panic("middleware exploded")
				}),
			}}))
		b := startClient(t, pool, ws, nil)
		res, err := b.client.Enqueue(ctx, noteArgs{}, &pgqueue.EnqueueOpts{MaxAttempts: 1})
		must(t, err)
		s := waitState(t, pool, res.ID, "discarded")
		if !slices.Equal(s.errors, []string{"panic: middleware exploded"}) || !strings.Contains(s.traces[0], "middleware_test.go") {
			t.Fatalf("errors %q traces %q", s.errors, s.traces)
		}
	})
}

// TestOutcomeOf checks how an attempt's error and context cause map to
// outcomes.
func TestOutcomeOf(t *testing.T) {
	t.Parallel()
	cancelled := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	bg := context.Background()
	boom := errors.New("boom")
	for name, tc := range map[string]struct {
		ctx  context.Context
		err  error
		want pgqueue.Outcome
	}{
		"nil":               {bg, nil, pgqueue.OutcomeCompleted},
		"nil after stop":    {cancelled(pgqueue.ErrStopping), nil, pgqueue.OutcomeCompleted},
		"error":             {bg, boom, pgqueue.OutcomeFailed},
		"panic":             {bg, &pgqueue.PanicError{Value: "x"}, pgqueue.OutcomeFailed},
		"snooze":            {bg, fmt.Errorf("wrapped: %w", pgqueue.JobSnooze(time.Second)), pgqueue.OutcomeSnoozed},
		"JobCancel":         {bg, pgqueue.JobCancel(boom), pgqueue.OutcomeCancelled},
		"cancel requested":  {cancelled(pgqueue.ErrJobCancelled), context.Canceled, pgqueue.OutcomeCancelled},
		"stopping":          {cancelled(pgqueue.ErrStopping), context.Canceled, pgqueue.OutcomeReleased},
		"lease lost":        {cancelled(pgqueue.ErrJobLeaseLost), context.Canceled, pgqueue.OutcomeLost},
		"timeout is failed": {cancelled(context.DeadlineExceeded), context.DeadlineExceeded, pgqueue.OutcomeFailed},
	} {
		if got := pgqueue.OutcomeOf(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}

// A nil middleware is refused when the client or the worker is set up,
// not when a job meets it.
func TestNilMiddlewareIsInvalid(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	for name, cfg := range map[string]*pgqueue.Config{
		"insert": {EnqueueMiddleware: []pgqueue.EnqueueMiddleware{nil}},
		"work":   {WorkMiddleware: []pgqueue.WorkMiddleware{nil}},
	} {
		if _, err := pgqueue.New(pool, cfg); !errors.Is(err, pgqueue.ErrInvalid) {
			t.Errorf("%s: New returned %v, want ErrInvalid", name, err)
		}
	}
	err := pgqueue.AddWorkerFunc(pgqueue.NewWorkers(), func(context.Context, *pgqueue.Job[noteArgs]) error { return nil },
		&pgqueue.WorkerOpts{Middleware: []pgqueue.WorkMiddleware{nil}})
	if !errors.Is(err, pgqueue.ErrInvalid) {
		t.Errorf("AddWorker returned %v, want ErrInvalid", err)
	}
}

// A periodic run an enqueue middleware skips counts as done: the schedule
// moves on instead of retrying the instant forever.
func TestInsertMiddlewareSkipsPeriodicRun(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	skip := pgqueue.EnqueueMiddlewareFunc(func(ctx context.Context, jobs []*pgqueue.EnqueueParams, next func(context.Context) (*pgqueue.EnqueuedJobs, error)) error {
		return nil
	})
	job := noteJob("skipped", pgqueue.EverySchedule(time.Hour), &pgqueue.PeriodicJobOpts{RunOnStart: true})
	startClient(t, pool, noteWorkers(t), &pgqueue.Config{
		PeriodicJobs:      []*pgqueue.PeriodicJob{job},
		EnqueueMiddleware: []pgqueue.EnqueueMiddleware{skip},
		Logger:            testlog.Discard(),
	})
	// The run on start is recorded as made, though no job was inserted.
	waitFor(t, "the run on start recorded", func() bool {
		var started bool
		must(t, pool.QueryRow(context.Background(), "SELECT EXISTS (SELECT FROM pgqueue.periodic_jobs WHERE name = 'skipped' AND start_term IS NOT NULL)").Scan(&started))
		return started
	})
	if n := countJobs(t, pool, "true"); n != 0 {
		t.Fatalf("%d jobs inserted", n)
	}
}
