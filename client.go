package pgqueue

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/completer"
	"github.com/pgqueue/pgqueue/internal/enqueue"
	"github.com/pgqueue/pgqueue/internal/executor"
	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/internal/maintenance"
	"github.com/pgqueue/pgqueue/internal/notifier"
	"github.com/pgqueue/pgqueue/internal/producer"
	"github.com/pgqueue/pgqueue/internal/schemawatch"
	"github.com/pgqueue/pgqueue/pglock"
)

// Client enqueues jobs and, once started, works the configured queues.
// It is safe for concurrent use.
type Client struct {
	pool   *pgxpool.Pool
	config *Config
	q      *jobsql.Queries
	locks  *pglock.Locker
	log    *slog.Logger

	// channel is the NOTIFY channel of the schema's inserts; the payload
	// is the queue name.
	channel string
	// control is the NOTIFY channel of control messages (JobCancel).
	control string
	// enq checks and writes the jobs the client enqueues.
	enq enqueue.Writer

	testHooks testHooks

	mu      sync.Mutex
	running *started // nil unless started
	// active is the running-jobs registry of the last Start. It outlives
	// Stop, so a handler still draining can complete its job in its own
	// transaction (CompleteTx).
	active *executor.ActiveJobs

	// periodic are the periodic jobs the maintenance leader enqueues.
	periodic *PeriodicJobs
	// watch is the schema watch of the last Start (SchemaErr).
	watch atomic.Pointer[schemawatch.Watch]
}

// New returns a client on pool. A nil config means defaults (see Config).
// New does not touch the database; the schema must have been created with
// Migrate. It returns ErrInvalid when Config.Queues is set without
// Config.Workers.
func New(pool *pgxpool.Pool, config *Config) (*Client, error) {
	if pool == nil {
		return nil, errNilPool
	}
	cfg, err := config.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(cfg.Queues) > 0 && cfg.Workers == nil {
		return nil, errNoWorkers
	}
	q, err := jobsql.Load(cfg.Schema)
	if err != nil {
		return nil, err
	}
	locks, err := pglock.New(pool, &pglock.Config{Schema: cfg.Schema, Logger: cfg.Logger, DirectConnConfig: cfg.DirectConnConfig})
	if err != nil {
		return nil, err
	}
	periodic, err := newPeriodicJobs(cfg.PeriodicJobs)
	if err != nil {
		return nil, err
	}
	c := &Client{pool: pool, config: cfg, q: q, locks: locks, log: cfg.Logger, channel: jobsql.NotifyChannel(cfg.Schema), control: jobsql.ControlChannel(cfg.Schema), periodic: periodic}
	c.enq = enqueue.Writer{Q: q, Schema: cfg.Schema, Channel: c.channel, MaxArgsSize: cfg.MaxArgsSize, DefaultQueue: QueueDefault, DefaultMaxAttempts: defaultMaxAttempts}
	return c, nil
}

// ID returns the client's ID, as stored in the worker_id of the jobs it
// claims.
func (c *Client) ID() string { return c.config.ID }

// SchemaErr returns nil while the schema is current, and an error wrapping
// ErrSchemaOutdated once the started client's statements (polls, claims,
// maintenance) found it dropped or migrated down below the version this
// client needs. While it is not nil the client holds those statements
// back (250 ms doubling to 4 s between tries) and logs the state once;
// when the schema is migrated up again it says so and returns nil. A
// readiness check (workerkit's /readyz) reports not ready meanwhile.
// Start refuses an outdated schema itself, so a client never started
// returns nil.
func (c *Client) SchemaErr() error { return c.watch.Load().Err() }

// started is what Start built and Stop tears down. Only the Client reads
// it: each component was handed what it uses when it was built.
type started struct {
	// cancelFetch ends the fetch context: producers, the poller and the
	// maintenance leader stop.
	cancelFetch context.CancelFunc
	// cancelJobs cancels every running job, with cause ErrStopping once
	// Stop's own deadline passed.
	cancelJobs context.CancelCauseFunc
	producers  map[string]*producer.Producer
	notifier   *notifier.Notifier // nil when the client works no queue
	completer  *completer.Completer
	heartbeats *executor.Heartbeater
	loops      sync.WaitGroup // producers, poller, maintenance
}

// Start begins working the configured queues and campaigning for the
// maintenance leadership (scheduler, rescuer, pruner, periodic jobs).
// Cancelling ctx stops fetching and cancels running jobs, which are handed
// back to their queue; call Stop for a graceful end.
func (c *Client) Start(ctx context.Context) error {
	if err := ctxError(ctx, "start"); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running != nil {
		return ErrAlreadyStarted
	}
	if err := c.pool.Ping(ctx); err != nil {
		return dbError("start", err)
	}
	// The exec mode first: behind a pooler, a statement in the wrong mode
	// fails before it could be refused (see checkPool).
	pooled, err := c.checkPool(ctx)
	if err != nil {
		return err
	}
	if err := c.checkSchema(ctx); err != nil {
		return err
	}
	sessions, err := c.planSessions(ctx, pooled)
	if err != nil {
		return err
	}
	cfg := c.config
	electorCfg := &pglock.ElectorConfig{Holder: cfg.ID, TTL: cfg.LeaderTTL,
		// A session of its own shows followers at once that a killed
		// leader is gone; behind a pooler only DirectConnConfig has one.
		SessionFailover: !sessions.pooled || cfg.DirectConnConfig != nil}
	if len(cfg.Queues) > 0 {
		// The poller checks the lease anyway and nudges the elector when
		// it is free; followers need not ask again every few seconds.
		electorCfg.RetryInterval = 3 * cfg.LeaderTTL
	}
	elector, err := c.locks.NewElector(maintenance.Lease, electorCfg)
	if err != nil {
		return err
	}

	// base is Start's context without its cancellation: the parent of the
	// writes that record results, so they land even while stopping.
	base := context.WithoutCancel(ctx)
	fetch, cancelFetch := context.WithCancel(ctx)
	jobs, cancelJobs := context.WithCancelCause(ctx)
	s := &started{cancelFetch: cancelFetch, cancelJobs: cancelJobs, producers: map[string]*producer.Producer{}}
	active := executor.NewActiveJobs()
	// Job contexts are not children of jobs (see ActiveJobs.CancelAll).
	context.AfterFunc(jobs, func() { active.CancelAll(context.Cause(jobs)) })

	outcomes := &jobsql.OutcomeReader{Pool: c.pool, Q: c.q, Base: base}
	finishQuery := c.pool.Query
	if c.testHooks.finishQuery != nil {
		finishQuery = c.testHooks.finishQuery
	}
	obs := resultObserver(cfg.Observer)
	// The producers of flow-limited queues claim again once their results
	// are written; set once every producer exists.
	var producers atomic.Pointer[map[string]*producer.Producer]
	s.completer = c.newCompleter(base, finishQuery, outcomes, obs, cfg.CompleteBatchSize, cfg.CompleteBatchDelay)
	producerOf := func(queue string) *producer.Producer {
		if m := producers.Load(); m != nil {
			return (*m)[queue]
		}
		return nil
	}
	s.completer.Wrote(func(queue string) {
		if p := producerOf(queue); p != nil {
			p.SlotsFreed()
		}
	})
	s.completer.Hurry(func(queue string) bool {
		p := producerOf(queue)
		return p != nil && p.QueueWide()
	})
	// A batch that released dependents (of any queue) wakes the local
	// producers, unless the client listens: without the NOTIFY, a chain's
	// next step would wait for the poll. With it, a second wake-up only
	// made an empty claim per step (statements per job 2.05 to 3.03 in a
	// chain), for no shorter release.
	// listen is the listen connection's state: zero until it first
	// connects, then listenUp or listenDown.
	var listen atomic.Int32
	s.completer.OnSettled(func(int) {
		if listen.Load() == listenUp {
			return
		}
		if m := producers.Load(); m != nil {
			for _, p := range *m {
				p.Wake()
			}
		}
	})
	go s.completer.Run()
	s.heartbeats = executor.NewHeartbeater(executor.HeartbeaterConfig{Pool: c.pool, Queries: c.q, Active: active, Log: c.log,
		WriteRefused: obs.WriteRefused, Base: base, Interval: cfg.HeartbeatInterval, JobLease: cfg.JobLease})
	go s.heartbeats.Run()

	exec := executor.New(c.executorConfig(active, s.completer, outcomes, obs, jobs))
	// One watch: the poller, the claims and the maintenance tasks stop
	// and start again together.
	watch := &schemawatch.Watch{Pool: c.pool, Schema: cfg.Schema, Log: c.log}
	c.watch.Store(watch)
	claims := &producer.Claimer{Pool: c.pool, Queries: c.q, Base: base, JobLease: cfg.JobLease, ClientID: cfg.ID, Schema: cfg.Schema,
		Log: c.log, Claimed: cfg.Observer.Claimed, Watch: watch}
	for name, qc := range cfg.Queues {
		p := producer.New(producer.Config{Queue: name, MaxWorkers: qc.MaxWorkers, Claims: claims, Exec: exec,
			Lookup: cfg.Workers.lookup, Log: c.log, BatchDelay: cfg.ClaimBatchDelay,
			ClaimAheadWindow: cfg.ClaimAheadWindow, JobLease: cfg.JobLease, ClaimAged: c.testHooks.claimAged})
		s.producers[name] = p
		s.loops.Add(1)
		go func() { defer s.loops.Done(); p.Run(fetch) }()
	}
	producers.Store(&s.producers)
	wake := func(queue string) {
		if p := s.producers[queue]; p != nil {
			p.Wake()
		}
	}
	wakeFlow := func(queue string, f producer.Flow) {
		if p := s.producers[queue]; p != nil {
			p.WakeFlow(f)
		}
	}
	if len(s.producers) > 0 {
		queues := make([]string, 0, len(s.producers))
		for q := range s.producers {
			queues = append(queues, q)
		}
		poll := &producer.Poller{Pool: c.pool, Queries: c.q, Log: c.log, Queues: queues, Interval: cfg.FetchPollInterval,
			LeaderLease: maintenance.Lease, Wake: wakeFlow, LeaderFree: elector.Nudge, Watch: watch, Base: base}
		s.loops.Add(1)
		go func() { defer s.loops.Done(); poll.Run(fetch) }()
	}
	if len(s.producers) > 0 && sessions.listen != nil {
		s.notifier, err = notifier.Start(fetch, notifier.Config{
			ConnConfig: sessions.listen,
			Channels:   []string{c.channel, c.control},
			OnNotify: func(channel, payload string) {
				if channel == c.control {
					active.HandleControl(payload, c.log)
					return
				}
				wake(payload)
			},
			// Notifications sent while disconnected are lost: look again.
			OnConnect: func() {
				if listen.Swap(listenUp) == listenDown {
					c.log.Info("pgqueue: listen connection regained")
				}
				// Cancel requests notified meanwhile were lost too: the
				// heartbeat reads them from the rows.
				s.heartbeats.Nudge()
				for _, p := range s.producers {
					p.Wake()
				}
			},
			OnError: func(err error) {
				listen.Store(listenDown)
				c.log.Warn("pgqueue: listen connection failed; polling meanwhile", "err", err)
			},
		})
		if err != nil {
			cancelFetch()
			s.loops.Wait()
			s.completer.Stop(ctx)
			s.heartbeats.Stop()
			cancelJobs(ErrStopping)
			return err
		}
	}
	leader := &maintenance.Leader{
		Elector: elector,
		Log:     c.log,
		Scheduler: &maintenance.Scheduler{Pool: c.pool, Q: c.q, Log: c.log, Base: base, Channel: c.channel,
			Interval: cfg.SchedulerInterval, Wake: c.wake, Watch: watch},
		Rescuer: &maintenance.Rescuer{Pool: c.pool, Q: c.q, Log: c.log, Rescued: cfg.Observer.Rescued, ClientID: cfg.ID, Base: base, Retry: cfg.RetryPolicy,
			Interval: cfg.RescueInterval, BeforeWrite: c.testHooks.beforeRescueWrite, Watch: watch},
		Pruner: &maintenance.Pruner{Pool: c.pool, Q: c.q, Log: c.log, Interval: cfg.PruneInterval,
			Completed: cfg.CompletedJobRetention, Cancelled: cfg.CancelledJobRetention, Discarded: cfg.DiscardedJobRetention, Watch: watch, Base: base},
		Periodic: c.periodicEnqueuer(base),
		Watch:    watch,
		Base:     base,
	}
	leader.Periodic.Watch = watch
	// withDefaults leaves Observer never nil.
	if obs := cfg.Observer; obs.Queues != nil {
		leader.ReportQueues = func(ctx context.Context) error {
			qs, err := c.QueueList(ctx)
			if err == nil {
				obs.Queues(qs)
			}
			return err
		}
		leader.QueuesInterval = obs.QueuesInterval
		leader.QueuesEnded = func() { obs.Queues(nil) }
	}
	s.loops.Add(1)
	go func() { defer s.loops.Done(); leader.Run(fetch) }()
	c.running, c.active = s, active
	return nil
}

// resultObserver is the part of obs the completer and the executor call.
func resultObserver(obs *Observer) completer.Observer {
	return completer.Observer{BatchWritten: obs.BatchWritten, ResultRecorded: obs.ResultRecorded, WriteRefused: obs.WriteRefused}
}

// newCompleter returns the completer of a started client (or of
// pgqueuetest.WorkJob), writing with query.
func (c *Client) newCompleter(base context.Context, query completer.QueryFunc, outcomes *jobsql.OutcomeReader, obs completer.Observer, batchSize int, batchDelay time.Duration) *completer.Completer {
	return completer.New(completer.Config{Query: query, Queries: c.q, Outcomes: outcomes, Log: c.log, Observer: obs, Base: base,
		BatchSize: batchSize, BatchDelay: batchDelay, GiveUp: c.config.JobLease})
}

// executorConfig describes the executor of a started client (or of
// pgqueuetest.WorkJob): jobs ends when the client cancels its jobs.
func (c *Client) executorConfig(active *executor.ActiveJobs, results *completer.Completer, outcomes *jobsql.OutcomeReader, obs completer.Observer, jobs context.Context) executor.Config {
	cfg := c.config
	ec := executor.Config{
		Active: active, Results: results, Outcomes: outcomes,
		Pool: c.pool, Queries: c.q, Locks: c.locks,
		Jobs: jobs, Log: c.log, Observer: obs,
		Retry: cfg.RetryPolicy, Owner: c,
		Middleware: workMiddleware(cfg.WorkMiddleware),
		JobLease:   cfg.JobLease, JobTimeout: cfg.JobTimeout,
		UnknownKindDelay: cfg.UnknownKindDelay, SingletonRetryDelay: cfg.SingletonRetryDelay,
		UnknownKindMaxTries: cfg.UnknownKindMaxTries,
	}
	if cfg.ErrorHandler != nil {
		ec.ErrorHandler = errorHandler{cfg.ErrorHandler}
	}
	return ec
}

// Stop stops fetching new jobs and waits for running ones to finish and
// their results to be written. When ctx ends first, Stop cancels the jobs
// still running (their context's cause is ErrStopping), waits up to
// Config.CancelGrace for their handlers to return, hands those jobs back to
// their queue without spending an attempt, and returns ctx's error. A
// handler that ignores its context past the grace is left running; its job
// stays claimed until its lease ends. Statements the client has already
// sent (a claim, a poll, a maintenance batch) are not cancelled: Stop
// waits for them, each bounded by 15 s.
func (c *Client) Stop(ctx context.Context) error {
	c.mu.Lock()
	s := c.running
	c.running = nil
	c.mu.Unlock()
	if s == nil {
		return ErrNotStarted
	}
	s.cancelFetch()
	s.loops.Wait() // producers have closed their executors' queues
	if s.notifier != nil {
		s.notifier.Stop()
	}
	defer func() {
		// Results are written before heartbeats end: until then the jobs
		// are still claimed. Past Stop's deadline, failing writes are not
		// retried: the rescuer will find those jobs.
		s.completer.Stop(ctx)
		s.heartbeats.Stop()
	}()

	done := make(chan struct{})
	go func() {
		for _, p := range s.producers {
			p.WaitExecutors()
		}
		close(done)
	}()
	select {
	case <-done:
		s.cancelJobs(ErrStopping)
		return nil
	case <-ctx.Done():
	}
	s.cancelJobs(ErrStopping)
	grace := time.NewTimer(c.config.CancelGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		c.log.Warn("pgqueue: handlers still running after cancel grace; their jobs wait for lease expiry", "grace", c.config.CancelGrace)
	}
	return fmt.Errorf("pgqueue: stop: %w", ctx.Err())
}

// wake tells the local producer of queue, if any, that jobs may be waiting.
func (c *Client) wake(queue string) {
	c.mu.Lock()
	s := c.running
	c.mu.Unlock()
	if s == nil {
		return
	}
	if p := s.producers[queue]; p != nil {
		p.Wake()
	}
}

// activeJobs returns the running-jobs registry of the last Start, or nil.
func (c *Client) activeJobs() *executor.ActiveJobs {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active
}

// testHooks let tests force races; all nil outside tests.
type testHooks struct {
	// beforeRescueWrite runs between reading expired jobs and putting them
	// back.
	beforeRescueWrite func(ids []int64)
	// finishQuery, when set, replaces the query that records job results,
	// so tests can lose its reply.
	finishQuery func(ctx context.Context, query string, args ...any) (pgx.Rows, error)
	// claimAged, when set, makes every claim look this much older when its
	// jobs are dispatched.
	claimAged time.Duration
}

// The states of a client's listen connection (Start), zero until it
// first connects.
const (
	listenUp   int32 = iota + 1 // connected
	listenDown                  // connected once, lost since
)
