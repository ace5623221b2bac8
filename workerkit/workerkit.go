package workerkit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/schemaversion"
)

// Exit codes of Run and Main.
const (
	// ExitOK: the worker stopped because a signal (or Run's context)
	// asked it to, whether its jobs finished or were handed back.
	ExitOK = 0
	// ExitFailed: the worker failed to start (database unreachable,
	// schema not migrated, no workers, listener address taken) or to
	// stop.
	ExitFailed = 1
	// ExitUsage: a mistake in the flags or the environment.
	ExitUsage = 2
)

// Options describe a worker program to Main and Run.
type Options struct {
	// Name is the program's name in its usage and error lines, and the
	// application_name of its database sessions unless the URL sets one.
	// Default: the base name of os.Args[0].
	Name string

	// Workers holds the program's handlers. Setup may set or replace it
	// (Env.Config.Workers). A worker started with none fails to start.
	Workers *pgqueue.Workers

	// Defaults are the program's defaults for the settings: the
	// environment and the flags override them; zero fields take the
	// kit's defaults (see Settings).
	Defaults Settings

	// Flags, if set, registers the program's own flags next to the kit's.
	Flags func(fs *flag.FlagSet)

	// Setup, if set, runs once the database is reachable and the schema
	// checked, before the client is built. It may register workers that
	// need the pool, add periodic jobs, middleware or an error handler,
	// or change any field of env.Config. An error fails the start.
	Setup func(ctx context.Context, env *Env) error
}

// Env is what Setup gets.
type Env struct {
	// Settings are the parsed settings.
	Settings *Settings
	// Pool is the process's pool, closed after the client stopped.
	Pool *pgxpool.Pool
	// Logger is the process's logger, the client's too.
	Logger *slog.Logger
	// Config is the client's configuration as the settings made it:
	// Schema, ID, Queues, JobLease, Logger, and Workers from Options.
	// After Setup the kit installs otelpgqueue's instrumentation in front
	// of EnqueueMiddleware and WorkMiddleware, and chains its Observer
	// before a Setup's (which is still called, and whose QueuesInterval
	// sets how often the leader's queue gauges are read), unless Setup
	// set MetricsHandler.
	Config *pgqueue.Config
	// MeterProvider is the provider behind /metrics (the OpenTelemetry
	// Prometheus exporter): instruments a Setup makes with it are served
	// beside the kit's.
	MeterProvider metric.MeterProvider
	// TracerProvider, if Setup sets it, records the spans of inserts and
	// attempts (otelpgqueue.Config.TracerProvider). Default nil: no
	// spans.
	TracerProvider trace.TracerProvider
	// MetricsHandler, if Setup sets it, serves /metrics instead of the
	// kit's metrics, which are then not recorded at all: for a program
	// that installs otelpgqueue itself, with a provider of its own.
	MetricsHandler http.Handler
}

// Main runs the worker program opts describes with the process's
// arguments, and exits with Run's exit code. It never returns.
func Main(opts *Options) {
	os.Exit(Run(context.Background(), opts, os.Args[1:], os.Stdout, os.Stderr))
}

// Run runs the worker program opts describes with args (without the
// program name) and returns its exit code: ExitOK, ExitFailed or
// ExitUsage. It writes the usage (for --help) to stdout and its logs to
// stderr.
//
// It starts the client, then waits. The first SIGTERM or SIGINT, or the
// end of ctx, starts the drain: the client stops claiming, /readyz
// answers 503, and running jobs get Settings.ShutdownTimeout to finish;
// then they are cancelled and handed back to their queue with their
// attempt given back (pgqueue.Client.Stop). A second signal cancels them
// at once; a third ends the process the default way.
func Run(ctx context.Context, opts *Options, args []string, stdout, stderr io.Writer) int {
	if opts == nil {
		opts = &Options{}
	}
	name := opts.Name
	if name == "" {
		name = filepath.Base(os.Args[0])
	}
	s, fs, err := parseSettings(name, args, os.Getenv, opts.Defaults, opts.Flags)
	if errors.Is(err, flag.ErrHelp) {
		usage(stdout, name, fs)
		return ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", name, err, name)
		return ExitUsage
	}
	log := newLogger(stderr, s)

	sigs := make(chan os.Signal, 3)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	p := &process{name: name, opts: opts, s: s, log: log}
	if p.metrics, err = newMetrics(p); err != nil {
		log.Error(name+": metrics: "+err.Error(), "err", err)
		return ExitFailed
	}
	defer p.metrics.shutdown(context.WithoutCancel(ctx))
	if err := p.run(ctx, sigs); err != nil {
		log.Error(name+": "+err.Error(), "err", err)
		return ExitFailed
	}
	return ExitOK
}

// newLogger returns the process's logger: JSON, or text when stderr is a
// terminal and the format is auto.
func newLogger(w io.Writer, s *Settings) *slog.Logger {
	o := &slog.HandlerOptions{Level: s.LogLevel}
	format := s.LogFormat
	if format == "auto" {
		format = "json"
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				format = "text"
			}
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, o))
	}
	return slog.New(slog.NewJSONHandler(w, o))
}

// The states /readyz reports.
const (
	stateStarting int32 = iota
	stateReady
	stateDraining
)

// process is one run of a worker program.
type process struct {
	name    string
	opts    *Options
	s       *Settings
	log     *slog.Logger
	metrics *metrics
	// metricsHandler is Env.MetricsHandler, once Setup set it: it
	// replaces metrics.handler.
	metricsHandler atomic.Pointer[http.Handler]

	state  atomic.Int32
	pool   atomic.Pointer[pgxpool.Pool]
	client atomic.Pointer[pgqueue.Client]
}

// run runs the process until its stop; its error is a failure to start
// or to stop.
func (p *process) run(ctx context.Context, sigs chan os.Signal) error {
	// first closes at the first signal or the end of ctx; second at the
	// second signal.
	first, second := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	defer close(done)
	go p.watchSignals(ctx, sigs, first, second, done)

	startCtx, cancelStart := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelStart()
	go func() {
		select {
		case <-first:
			cancelStart()
		case <-done:
		}
	}()

	if p.s.HTTPAddr != "" {
		srv, err := p.listen()
		if err != nil {
			return err
		}
		defer func() {
			shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutCtx)
		}()
	}

	client, pool, err := p.start(startCtx)
	if pool != nil {
		defer pool.Close()
	}
	if err != nil {
		if startCtx.Err() != nil {
			p.log.Info(p.name + ": stopped before the start finished")
			return nil
		}
		return err
	}
	p.state.Store(stateReady)
	p.log.Info(p.name+": started", "queues", queuesValue{&p.s.Queues}.String(), "schema", p.s.Schema, "id", client.ID())

	<-first
	p.state.Store(stateDraining)
	p.log.Info(p.name+": draining: running jobs may finish", "timeout", p.s.ShutdownTimeout)
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.s.ShutdownTimeout)
	defer cancel()
	go func() {
		select {
		case <-second:
			p.log.Warn(p.name + ": second signal: cancelling running jobs")
			cancel()
		case <-stopCtx.Done():
		}
	}()
	err = client.Stop(stopCtx)
	switch {
	case err == nil:
		p.log.Info(p.name + ": stopped: every running job finished")
	case stopCtx.Err() != nil:
		p.log.Warn(p.name+": stopped: running jobs were cancelled and handed back", "err", err)
	default:
		return fmt.Errorf("stop: %w", err)
	}
	return nil
}

// watchSignals closes first at the first signal or the end of ctx, and
// second at the second signal; after it, signals are no longer caught.
func (p *process) watchSignals(ctx context.Context, sigs chan os.Signal, first, second, done chan struct{}) {
	n := 0
	ctxDone := ctx.Done()
	for {
		select {
		case sig := <-sigs:
			n++
			p.log.Info(p.name+": signal received", "signal", sig.String(), "count", n)
			switch n {
			case 1:
				close(first)
			case 2:
				close(second)
				// A third signal takes the default action: the end.
				signal.Stop(sigs)
				return
			}
		case <-ctxDone:
			ctxDone = nil
			if n == 0 {
				n = 1
				close(first)
			}
		case <-done:
			return
		}
	}
}

// migrate applies pgqueue's migrations through the direct connection when
// there is one: migrations hold session advisory locks, which a pooler in
// transaction mode would leave on a backend it shares (pgqueue.Migrate
// refuses to migrate through one).
func (p *process) migrate(ctx context.Context, pool *pgxpool.Pool, direct *pgxpool.Config) (pgqueue.MigrateResult, error) {
	if direct == nil {
		return pgqueue.Migrate(ctx, pool, p.s.Schema)
	}
	cfg := direct.Copy()
	cfg.MaxConns = 4 // the migration lock's session, golang-migrate's and reads
	dpool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return pgqueue.MigrateResult{}, fmt.Errorf("open direct pool: %w", err)
	}
	defer dpool.Close()
	return pgqueue.Migrate(ctx, dpool, p.s.Schema)
}

// start opens the pool, checks the schema and starts the client. The
// pool is returned, to be closed by the caller, even with an error.
func (p *process) start(ctx context.Context) (*pgqueue.Client, *pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(p.s.DatabaseURL)
	if err != nil {
		return nil, nil, fmt.Errorf("database URL: %w", err)
	}
	cfg.ConnConfig.ConnectTimeout = p.s.ConnectTimeout
	// pgxpool's default (4, or the CPUs) would make handlers that each
	// write in a transaction of their own wait for a connection.
	if !strings.Contains(p.s.DatabaseURL, "pool_max_conns") {
		total := int32(0)
		for _, n := range p.s.Queues {
			total += int32(n)
		}
		cfg.MaxConns = max(cfg.MaxConns, total+4)
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = p.name
	}
	var direct *pgxpool.Config
	if p.s.DirectDatabaseURL != "" {
		if direct, err = pgxpool.ParseConfig(p.s.DirectDatabaseURL); err != nil {
			return nil, nil, fmt.Errorf("direct database URL: %w", err)
		}
		direct.ConnConfig.ConnectTimeout = p.s.ConnectTimeout
		if direct.ConnConfig.RuntimeParams["application_name"] == "" {
			direct.ConnConfig.RuntimeParams["application_name"] = p.name
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("open pool: %w", err)
	}
	p.pool.Store(pool)
	if err := pool.Ping(ctx); err != nil {
		return nil, pool, fmt.Errorf("database unreachable: %w", err)
	}
	if p.s.Migrate {
		res, err := p.migrate(ctx, pool, direct)
		if err != nil {
			return nil, pool, fmt.Errorf("migrate: %w", err)
		}
		p.log.Info(p.name+": migrated", "schema", p.s.Schema, "from", res.From, "to", res.To)
	}
	if err := checkSchema(ctx, pool, p.s.Schema); err != nil {
		return nil, pool, err
	}

	queues := make(map[string]pgqueue.QueueConfig, len(p.s.Queues))
	for name, n := range p.s.Queues {
		queues[name] = pgqueue.QueueConfig{MaxWorkers: n}
	}
	env := &Env{Settings: p.s, Pool: pool, Logger: p.log, MeterProvider: p.metrics.provider, Config: &pgqueue.Config{
		Schema: p.s.Schema, ID: p.s.ID, Queues: queues, JobLease: p.s.JobLease,
		Workers: p.opts.Workers, Logger: p.log,
	}}
	if direct != nil {
		env.Config.DirectConnConfig = direct.ConnConfig
	}
	if p.opts.Setup != nil {
		if err := p.opts.Setup(ctx, env); err != nil {
			return nil, pool, fmt.Errorf("setup: %w", err)
		}
	}
	if env.Config.Workers == nil {
		return nil, pool, errors.New("no workers: set Options.Workers or Env.Config.Workers in Setup")
	}
	if env.MetricsHandler != nil {
		p.metricsHandler.Store(&env.MetricsHandler)
	} else if err := p.metrics.install(env.Config, env.TracerProvider); err != nil {
		return nil, pool, fmt.Errorf("metrics: %w", err)
	}
	client, err := pgqueue.New(pool, env.Config)
	if err != nil {
		return nil, pool, fmt.Errorf("configure client: %w", err)
	}
	// Not ctx: Start's context is the client's life, and ending it would
	// cancel running jobs instead of letting them drain.
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, pool, fmt.Errorf("start: %w", err)
	}
	p.client.Store(client)
	return client, pool, nil
}

// checkSchema refuses a schema that is not migrated to the version this
// binary's queries expect, before the first claim fails on a missing
// column.
func checkSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	v, err := schemaversion.Read(ctx, pool, schema)
	if err != nil {
		return err
	}
	want := schemaversion.Latest()
	switch {
	case !v.Migrated || v.Version == 0:
		return fmt.Errorf("schema %q is not migrated: run 'pgqueue migrate up' (or start with --migrate)", schema)
	case v.Dirty:
		return fmt.Errorf("schema %q is dirty at version %d: a migration failed half-way; repair it, then 'pgqueue migrate force'", schema, v.Version)
	case v.Version < want:
		return fmt.Errorf("schema %q is at version %d, this worker needs %d: run 'pgqueue migrate up' (or start with --migrate)", schema, v.Version, want)
	}
	return nil
}

// listen starts the HTTP listener of /healthz, /readyz and /metrics.
func (p *process) listen() (*http.Server, error) {
	ln, err := net.Listen("tcp", p.s.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: p.handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Error(p.name+": http listener failed", "err", err)
		}
	}()
	p.log.Info(p.name+": listening", "addr", ln.Addr().String())
	return srv, nil
}
