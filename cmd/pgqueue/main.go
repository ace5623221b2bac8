// Command pgqueue manages pgqueue's schema, inspects and controls jobs,
// queues and locks, and shows the queue at work.
//
// Usage:
//
//	pgqueue <command> [arguments]
//
// The commands are:
//
//	migrate   apply, revert or inspect the schema migrations:
//	          pgqueue migrate up | down N | down --all | version | force V
//	jobs      list, get, retry, cancel or delete jobs
//	queues    list, pause, resume or limit queues
//	workflows show a workflow (its jobs by state, what each waits for), cancel or retry it
//	stats     queues, recent throughput and running jobs (--watch)
//	locks     lease locks and the advisory locks held right now
//	enqueue   enqueue one job: pgqueue enqueue KIND ARGS-JSON
//	version   print the binary's version
//	demo      enqueue and work a batch of jobs with a live progress line
//	bench     measure throughput and latency: burn-down (with --raw, the
//	          raw-SQL ceiling in the same run), sustained, idle, prune
//	ui        serve the web dashboard: pgqueue ui --listen 127.0.0.1:8080
//	help      show the usage of pgqueue or of one command
//
// Every command that talks to the database takes --database-url (default:
// the DATABASE_URL environment variable) and --schema; every command that
// reads takes --json. Read commands change nothing in the database. Run
// "pgqueue help <command>" for details.
//
// Exit codes: 0 on success, 1 when the command failed (the error is printed
// on stderr), 2 when the command line was wrong, 3 when a job named does
// not exist.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"syscall"

	"github.com/pgqueue/pgqueue/internal/sqlschema"
)

// Exit codes of every command.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

const mainUsage = `pgqueue manages pgqueue's schema and shows the queue at work.

Usage:

	pgqueue <command> [arguments]

Commands:

	migrate   apply, revert or inspect the schema migrations
	grants    print the SQL granting a role what an application needs
	jobs      list, get, retry, cancel or delete jobs
	queues    list, pause, resume or limit queues
	workflows show a workflow (its jobs by state, what each waits for), cancel or retry it
	stats     queues, recent throughput and running jobs (--watch)
	locks     lease locks and the advisory locks held right now
	enqueue   enqueue one job: pgqueue enqueue KIND ARGS-JSON
	version   print the binary's version
	demo      enqueue and work a batch of jobs with a live progress line
	bench     measure throughput and latency, and the raw-SQL ceiling
	ui        serve the web dashboard: pgqueue ui --listen 127.0.0.1:8080
	help      show this text, or the usage of one command

Run "pgqueue help <command>" for a command's flags and arguments.
Read commands take --json. Exit codes: 0 ok, 1 failure, 2 usage, 3 a job
named does not exist.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts an orderly end; a second one ends the program
	// at once, the default behaviour once stop has run.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to the command args name and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "migrate":
		return runMigrate(ctx, rest, stdout, stderr)
	case "grants":
		return runGrants(ctx, rest, stdout, stderr)
	case "jobs":
		return runJobs(ctx, rest, stdout, stderr)
	case "queues":
		return runQueues(ctx, rest, stdout, stderr)
	case "workflows":
		return runWorkflows(ctx, rest, stdout, stderr)
	case "stats":
		return runStats(ctx, rest, stdout, stderr)
	case "locks":
		return runLocks(ctx, rest, stdout, stderr)
	case "enqueue":
		return runEnqueue(ctx, rest, stdout, stderr)
	case "version", "--version":
		return runVersion(ctx, rest, stdout, stderr)
	case "demo":
		return runDemo(ctx, rest, stdout, stderr)
	case "bench":
		return runBench(ctx, rest, stdout, stderr)
	case "ui":
		return runUI(ctx, rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		return runHelp(ctx, rest, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "pgqueue: unknown command %q\nRun 'pgqueue help' for usage.\n", name)
		return exitUsage
	}
}

// usageError is a mistake on the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// parseFailed reports the error of parsing command's arguments and returns
// the exit code: the usage on stdout for -h, the error on stderr otherwise.
// A parse error is always a usage error.
func parseFailed(command, usage string, err error, stdout, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "pgqueue %s: %v\nRun 'pgqueue help %s' for usage.\n", command, err, command)
	return exitUsage
}

// newFlagSet returns a flag set that reports errors to its caller instead
// of printing them, so that the command decides what goes where.
func newFlagSet(command string) *flag.FlagSet {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

var negativeNumber = regexp.MustCompile(`^-[0-9]+$`)

// parseInterspersed parses fs's flags wherever they stand among args, so
// that "migrate up --schema x" and "migrate --schema x up" mean the same,
// and returns the positional arguments in order. After "--" everything is
// positional; a negative number is positional too, for "force -1".
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		for len(args) > 0 && negativeNumber.MatchString(args[0]) {
			positional = append(positional, args[0])
			args = args[1:]
		}
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// dbFlags are the flags every command that talks to the database has.
type dbFlags struct {
	databaseURL string
	schema      string
}

func (f *dbFlags) register(fs *flag.FlagSet, defaultSchema string) {
	fs.StringVar(&f.databaseURL, "database-url", os.Getenv("DATABASE_URL"), "")
	fs.StringVar(&f.schema, "schema", defaultSchema, "")
}

// checkSchema refuses a schema name pgqueue would refuse, before any
// connection is made.
func (f *dbFlags) checkSchema() error {
	if err := sqlschema.Validate(f.schema); err != nil {
		return usagef("invalid --schema: %v", err)
	}
	return nil
}

// parseArgs is parseInterspersed for the commands that report through
// finish: a parse error is a usage error, -h asks for the usage.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, err := parseInterspersed(fs, args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return nil, &usageError{msg: err.Error()}
	}
	return pos, err
}
