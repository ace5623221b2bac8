// Package workerproc is the set-up the worker commands of the integration
// tests (faultworker, lockworker, periodicworker) share: the common flags, the logger, the
// pool with the process's application_name, signal handling, the stdout
// lines the tests read, and the exit codes.
//
// A command describes itself in a Spec and hands it to Main:
//
//	func main() {
//		workerproc.Main(workerproc.Spec{Command: "faultworker", Run: run, ...})
//	}
//
// Every command takes -db, -name, -schema, -lease, -connect-timeout,
// -stop-timeout and -v. Its sessions carry application_name
// <command>-<name>. Bad flags exit with code 2 and a line
// "<command>: <error>" on stderr; a failed Run with code 1 and a line
// "<command> <name>: <error>".
package workerproc

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// Spec describes a worker command.
type Spec struct {
	// Command is the command's name: it names its flag set, starts its
	// error lines and its sessions' application_name. Required.
	Command string

	// LogLevel is the level logged at without -v (with -v: debug).
	// Default (zero) slog.LevelInfo.
	LogLevel slog.Level

	// LeaseUsage is the usage text of -lease. Default "job lease".
	LeaseUsage string

	// Flags, if set, registers the command's own flags on fs.
	Flags func(fs *flag.FlagSet)

	// Check, if set, checks the command's own flags once all are parsed.
	Check func() error

	// Pool, if set, adjusts the pool's configuration before the pool
	// opens (MaxConns, runtime parameters). application_name and the
	// connect timeout are set already.
	Pool func(cfg *pgxpool.Config)

	// Run runs the worker until ctx ends, which the first SIGTERM or SIGINT
	// does; a second one kills the process. It calls Worker.Ready once
	// working. Required.
	Run func(ctx context.Context, w *Worker) error
}

// Worker is what Main sets up for Run.
type Worker struct {
	// Name is -name.
	Name string
	// AppName is the application_name of every session of the process,
	// those dialled with Pool's configuration too: <command>-<name>.
	AppName string
	// Schema is -schema: pgqueue's schema.
	Schema string
	// Lease is -lease: the job lease.
	Lease time.Duration
	// StopTimeout is -stop-timeout: how long a graceful stop may take.
	StopTimeout time.Duration
	// Log logs to stderr, each record with worker=<AppName>.
	Log *slog.Logger
	// Pool is the process's pool. Main closes it after Run.
	Pool *pgxpool.Pool

	mu  sync.Mutex // serialises the lines on out
	out io.Writer
}

// Say prints one line on stdout, which the tests read. Safe for
// concurrent use: lines never mix.
func (w *Worker) Say(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintf(w.out, format+"\n", args...)
}

// Ready prints "ready", which the tests wait for before injecting faults.
func (w *Worker) Ready() { w.Say("ready") }

// StopContext returns a context for a graceful stop: it ends after
// StopTimeout, whether or not ctx, the one Run got, ended.
func (w *Worker) StopContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), w.StopTimeout)
}

// Serve starts client, says it is ready, and stops it gracefully (within
// StopTimeout) once ctx ends, which the first signal does. It returns
// Stop's error; the caller prints its own closing line.
func (w *Worker) Serve(ctx context.Context, client *pgqueue.Client) error {
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	w.Ready()
	<-ctx.Done()
	stopCtx, cancel := w.StopContext(ctx)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	return nil
}

// Main runs the command s with the process's arguments and exits with its
// exit code. It never returns.
func Main(s Spec) {
	os.Exit(run(s, os.Args[1:], os.Stdout, os.Stderr))
}

// flags are the values of the flags every command takes.
type flags struct {
	db, name, schema          string
	lease                     time.Duration
	connectTimeout, stopAfter time.Duration
	verbose                   bool
}

// parse parses args into the common flags and s's own.
func (s *Spec) parse(args []string, stderr io.Writer) (*flags, error) {
	fs := flag.NewFlagSet(s.Command, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &flags{}
	leaseUsage := s.LeaseUsage
	if leaseUsage == "" {
		leaseUsage = "job lease"
	}
	fs.StringVar(&f.db, "db", os.Getenv("DATABASE_URL"), "database URL (default $DATABASE_URL)")
	fs.StringVar(&f.name, "name", "", "worker name; its sessions' application_name is "+s.Command+"-<name> (required)")
	fs.StringVar(&f.schema, "schema", pgqueue.SchemaDefault, "pgqueue schema")
	fs.DurationVar(&f.lease, "lease", 2*time.Second, leaseUsage)
	fs.DurationVar(&f.connectTimeout, "connect-timeout", 3*time.Second, "connect timeout of the worker's connections")
	fs.DurationVar(&f.stopAfter, "stop-timeout", 10*time.Second, "how long a graceful stop may take")
	fs.BoolVar(&f.verbose, "v", false, "log at debug level")
	if s.Flags != nil {
		s.Flags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case f.db == "":
		return nil, errors.New("-db or DATABASE_URL is required")
	case f.name == "":
		return nil, errors.New("-name is required")
	}
	if s.Check != nil {
		if err := s.Check(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// run is Main with its arguments and output given; it returns the exit
// code.
func run(s Spec, args []string, stdout, stderr io.Writer) int {
	f, err := s.parse(args, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", s.Command, err)
		return 2
	}
	if err := s.serve(f, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", s.Command, f.name, err)
		return 1
	}
	return 0
}

// serve sets the worker up and runs it.
func (s *Spec) serve(f *flags, stdout, stderr io.Writer) error {
	level := s.LogLevel
	if f.verbose {
		level = slog.LevelDebug
	}
	w := &Worker{
		Name:        f.name,
		AppName:     s.Command + "-" + f.name,
		Schema:      f.schema,
		Lease:       f.lease,
		StopTimeout: f.stopAfter,
		out:         stdout,
	}
	w.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("worker", w.AppName)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// Once the first signal ended ctx, a second one kills the process the
	// default way.
	context.AfterFunc(ctx, stop)

	cfg, err := pgxpool.ParseConfig(f.db)
	if err != nil {
		return fmt.Errorf("parse -db: %w", err)
	}
	// Connections dialled with this configuration outside the pool (the
	// session locks') carry the name as well.
	cfg.ConnConfig.RuntimeParams["application_name"] = w.AppName
	cfg.ConnConfig.ConnectTimeout = f.connectTimeout
	if s.Pool != nil {
		s.Pool(cfg)
	}
	if w.Pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return fmt.Errorf("open pool: %w", err)
	}
	defer w.Pool.Close()
	return s.Run(ctx, w)
}
