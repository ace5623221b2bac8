package workerkit

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/sqlschema"
)

// Settings are a worker process's settings, read from flags and the
// environment: a flag wins over its environment variable, which wins over
// the program's default (Options.Defaults), which wins over the kit's.
type Settings struct {
	// DatabaseURL is the PostgreSQL connection string. Flag
	// --database-url, environment DATABASE_URL. Required. Unless it sets
	// pool_max_conns, the pool gets the sum of the queues' concurrency
	// plus 4 connections (at least pgxpool's default), so handlers that
	// write in transactions of their own do not wait for one.
	DatabaseURL string
	// DirectDatabaseURL is a connection string that reaches PostgreSQL
	// itself, for when DatabaseURL goes through a pooler such as PgBouncer
	// in transaction mode: the client listens for notifications and takes
	// session locks on it (pgqueue.Config.DirectConnConfig), and --migrate
	// migrates through it. Flag --direct-database-url, environment
	// PGQUEUE_DIRECT_DATABASE_URL. Default empty: behind a pooler the
	// client then polls.
	DirectDatabaseURL string
	// Schema is pgqueue's schema. Flag --schema, environment
	// PGQUEUE_SCHEMA. Default pgqueue.SchemaDefault.
	Schema string
	// Queues are the queues to work and how many jobs of each run at
	// once. Flag --queues, environment PGQUEUE_QUEUES, written
	// "default=10,mail=2". Default default=10.
	Queues map[string]int
	// ID names the client in its jobs' worker_id. Flag --id, environment
	// PGQUEUE_ID. Default: pgqueue's (host, pid and a random suffix).
	ID string
	// JobLease is the claim lease of a job (pgqueue.Config.JobLease). Flag
	// --job-lease, environment PGQUEUE_JOB_LEASE. Default, or 0: pgqueue's
	// (30s).
	JobLease time.Duration
	// ShutdownTimeout is how long running jobs may take to finish after
	// the first SIGTERM or SIGINT before they are cancelled and handed
	// back. Flag --shutdown-timeout, environment PGQUEUE_SHUTDOWN_TIMEOUT.
	// Default 30s.
	ShutdownTimeout time.Duration
	// ConnectTimeout bounds each connection attempt, so an unreachable
	// database fails the start quickly. Flag --connect-timeout,
	// environment PGQUEUE_CONNECT_TIMEOUT. Default 10s.
	ConnectTimeout time.Duration
	// HTTPAddr is the address of the /healthz, /readyz and /metrics
	// listener, such as ":9090"; empty means no listener. Flag
	// --http-addr, environment PGQUEUE_HTTP_ADDR. Default empty.
	HTTPAddr string
	// Migrate applies pgqueue's migrations before starting, for a service
	// that owns its database alone. Flag --migrate, environment
	// PGQUEUE_MIGRATE ("true" or "false"). Default false: run "pgqueue
	// migrate up" in a deploy step instead.
	Migrate bool
	// LogFormat is "json", "text" or "auto" (text when stderr is a
	// terminal, JSON otherwise). Flag --log-format, environment
	// PGQUEUE_LOG_FORMAT. Default auto.
	LogFormat string
	// LogLevel is the lowest level logged. Flag --log-level, environment
	// PGQUEUE_LOG_LEVEL: debug, info, warn or error. Default info.
	LogLevel slog.Level
}

// Kit defaults, for the fields whose default is not pgqueue's.
const (
	DefaultShutdownTimeout = 30 * time.Second
	DefaultConnectTimeout  = 10 * time.Second
	DefaultQueues          = "default=10"
)

// setting is one flag and the environment variable behind it.
type setting struct {
	flag, env, usage string
}

var settingsTable = []setting{
	{"database-url", "DATABASE_URL", "PostgreSQL connection string (required)"},
	{"direct-database-url", "PGQUEUE_DIRECT_DATABASE_URL", "connection string that bypasses a pooler, for notifications, session locks and --migrate"},
	{"schema", "PGQUEUE_SCHEMA", "pgqueue's schema"},
	{"queues", "PGQUEUE_QUEUES", "queues to work and their concurrency, name=N,name=N"},
	{"id", "PGQUEUE_ID", "client ID recorded in the jobs' worker_id (default: host, pid, random)"},
	{"job-lease", "PGQUEUE_JOB_LEASE", "job claim lease, renewed by heartbeats"},
	{"shutdown-timeout", "PGQUEUE_SHUTDOWN_TIMEOUT", "how long running jobs may finish after SIGTERM before they are cancelled"},
	{"connect-timeout", "PGQUEUE_CONNECT_TIMEOUT", "timeout of each connection attempt"},
	{"http-addr", "PGQUEUE_HTTP_ADDR", "address of /healthz, /readyz and /metrics; empty: no listener"},
	{"migrate", "PGQUEUE_MIGRATE", "apply pgqueue's migrations before starting"},
	{"log-format", "PGQUEUE_LOG_FORMAT", "json, text, or auto: text on a terminal, JSON otherwise"},
	{"log-level", "PGQUEUE_LOG_LEVEL", "debug, info, warn or error"},
}

// queuesValue is the flag.Value of --queues.
type queuesValue struct{ m *map[string]int }

func (v queuesValue) String() string {
	if v.m == nil || *v.m == nil {
		return ""
	}
	parts := make([]string, 0, len(*v.m))
	for _, name := range slices.Sorted(maps.Keys(*v.m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", name, (*v.m)[name]))
	}
	return strings.Join(parts, ",")
}

func (v queuesValue) Set(s string) error {
	m, err := parseQueues(s)
	if err != nil {
		return err
	}
	*v.m = m
	return nil
}

// parseQueues reads "name=N,name=N".
func parseQueues(s string) (map[string]int, error) {
	m := map[string]int{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, n, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want name=concurrency", part)
		}
		c, err := strconv.Atoi(n)
		if err != nil || c < 1 {
			return nil, fmt.Errorf("%q: concurrency must be a whole number of at least 1", part)
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("queue %q given twice", name)
		}
		m[name] = c
	}
	if len(m) == 0 {
		return nil, errors.New("no queue given")
	}
	return m, nil
}

// levelValue is the flag.Value of --log-level.
type levelValue struct{ l *slog.Level }

func (v levelValue) String() string {
	if v.l == nil {
		return ""
	}
	return strings.ToLower(v.l.String())
}

func (v levelValue) Set(s string) error { return v.l.UnmarshalText([]byte(s)) }

// register defines the settings' flags on fs, with d's values as their
// defaults.
func (s *Settings) register(fs *flag.FlagSet, d Settings) {
	*s = d
	fs.StringVar(&s.DatabaseURL, "database-url", d.DatabaseURL, "")
	fs.StringVar(&s.DirectDatabaseURL, "direct-database-url", d.DirectDatabaseURL, "")
	fs.StringVar(&s.Schema, "schema", d.Schema, "")
	fs.Var(queuesValue{&s.Queues}, "queues", "")
	fs.StringVar(&s.ID, "id", d.ID, "")
	fs.DurationVar(&s.JobLease, "job-lease", d.JobLease, "")
	fs.DurationVar(&s.ShutdownTimeout, "shutdown-timeout", d.ShutdownTimeout, "")
	fs.DurationVar(&s.ConnectTimeout, "connect-timeout", d.ConnectTimeout, "")
	fs.StringVar(&s.HTTPAddr, "http-addr", d.HTTPAddr, "")
	fs.BoolVar(&s.Migrate, "migrate", d.Migrate, "")
	fs.StringVar(&s.LogFormat, "log-format", d.LogFormat, "")
	fs.Var(levelValue{&s.LogLevel}, "log-level", "")
	for _, st := range settingsTable {
		fs.Lookup(st.flag).Usage = st.usage
	}
}

// withKitDefaults fills the zero fields of d with the kit's defaults.
func (d Settings) withKitDefaults() Settings {
	if d.Schema == "" {
		d.Schema = pgqueue.SchemaDefault
	}
	if d.Queues == nil {
		d.Queues, _ = parseQueues(DefaultQueues)
	}
	if d.ShutdownTimeout == 0 {
		d.ShutdownTimeout = DefaultShutdownTimeout
	}
	if d.ConnectTimeout == 0 {
		d.ConnectTimeout = DefaultConnectTimeout
	}
	if d.LogFormat == "" {
		d.LogFormat = "auto"
	}
	return d
}

// parseSettings reads args and the environment (through getenv) over the
// defaults d. Program flags registered by extra are parsed with them.
// flag.ErrHelp asks for the usage.
func parseSettings(name string, args []string, getenv func(string) string, d Settings, extra func(*flag.FlagSet)) (*Settings, *flag.FlagSet, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	s := &Settings{}
	s.register(fs, d.withKitDefaults())
	if extra != nil {
		extra(fs)
	}
	// The environment goes in first, as if given as flags, so the command
	// line overrides it and a bad value is reported with its variable.
	for _, st := range settingsTable {
		if v, ok := lookupEnv(getenv, st.env); ok {
			if err := fs.Set(st.flag, v); err != nil {
				return nil, fs, fmt.Errorf("environment %s: %w", st.env, err)
			}
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	if fs.NArg() > 0 {
		return nil, fs, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := s.check(); err != nil {
		return nil, fs, err
	}
	return s, fs, nil
}

func lookupEnv(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	return v, v != ""
}

// check validates s after parsing.
func (s *Settings) check() error {
	switch {
	case s.DatabaseURL == "":
		return errors.New("no database: set --database-url or DATABASE_URL")
	case s.ShutdownTimeout <= 0:
		return errors.New("--shutdown-timeout must be positive")
	case s.ConnectTimeout <= 0:
		return errors.New("--connect-timeout must be positive")
	case s.JobLease != 0 && s.JobLease < time.Second:
		return errors.New("--job-lease must be at least 1s")
	}
	if err := sqlschema.Validate(s.Schema); err != nil {
		return fmt.Errorf("--schema: %w", err)
	}
	switch s.LogFormat {
	case "auto", "json", "text":
	default:
		return fmt.Errorf("--log-format must be auto, json or text, got %q", s.LogFormat)
	}
	return nil
}

// usage writes the usage of the program's flags, each with its
// environment variable and default.
func usage(w io.Writer, name string, fs *flag.FlagSet) {
	env := map[string]string{}
	for _, st := range settingsTable {
		env[st.flag] = st.env
	}
	fmt.Fprintf(w, "Usage: %s [flags]\n\nA pgqueue worker: works its queues until SIGTERM or SIGINT, then drains.\nFlags (each also read from the environment variable shown):\n\n", name)
	fs.VisitAll(func(f *flag.Flag) {
		fmt.Fprintf(w, "  --%s", f.Name)
		if e := env[f.Name]; e != "" {
			fmt.Fprintf(w, " (env %s)", e)
		}
		fmt.Fprintf(w, "\n        %s", f.Usage)
		if f.DefValue != "" && f.DefValue != "0s" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
	fmt.Fprint(w, "\nExit codes: 0 after a stop asked for by a signal, 1 when the worker failed\nto start or failed, 2 for a mistake in the flags or environment.\n")
}
