package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/pgqueue/pgqueue"
)

const enqueueUsage = `Usage: pgqueue enqueue KIND ARGS-JSON [flags]

Enqueues one job of kind KIND with the args ARGS-JSON (a JSON object),
for scripts and one-off jobs, through the same insert as a Go client's
Enqueue. Prints the job's id, or the job with --json.

Flags:

	--queue NAME        queue (default "default")
	--priority N        lower runs first (default 0)
	--max-attempts N    attempts before the job is discarded (default 25)
	--run-at T          run at T (RFC 3339) instead of now
	--in D              run after the duration D (5m, 1h30m)
	--tag T             a tag; repeat or separate with commas
	--database-url URL  database (default: $DATABASE_URL)
	--schema NAME       schema of pgqueue's tables (default "pgqueue")
	--json              print the job as JSON
`

// rawArgs are args given as JSON for a kind named at run time.
type rawArgs struct {
	kind string
	args json.RawMessage
}

// Kind implements pgqueue.JobArgs.
func (a rawArgs) Kind() string { return a.kind }

// MarshalJSON stores the args as given.
func (a rawArgs) MarshalJSON() ([]byte, error) { return a.args, nil }

func runEnqueue(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var (
		f                   readFlags
		opts                pgqueue.EnqueueOpts
		priority            int
		runAt               string
		in                  time.Duration
		tags                listFlag
		queue               string
		maxAttempts         int
		kind, argsJSONValue string
	)
	fs := newFlagSet("enqueue")
	f.register(fs)
	fs.StringVar(&queue, "queue", pgqueue.QueueDefault, "")
	fs.IntVar(&priority, "priority", 0, "")
	fs.IntVar(&maxAttempts, "max-attempts", 0, "") // 0: the library's default
	fs.StringVar(&runAt, "run-at", "", "")
	fs.DurationVar(&in, "in", 0, "")
	fs.Var(&tags, "tag", "")
	err := func() error {
		pos, err := parseArgs(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != 2 {
			return usagef("enqueue takes KIND and ARGS-JSON, got %d arguments", len(pos))
		}
		kind, argsJSONValue = pos[0], pos[1]
		var obj map[string]any
		if err := json.Unmarshal([]byte(argsJSONValue), &obj); err != nil || obj == nil {
			return usagef("ARGS-JSON must be a JSON object, got %q", argsJSONValue)
		}
		if priority < -32768 || priority > 32767 {
			return usagef("--priority must fit in a smallint")
		}
		if maxAttempts < 0 {
			return usagef("--max-attempts must be at least 1")
		}
		switch {
		case runAt != "" && in != 0:
			return usagef("--run-at and --in exclude each other")
		case runAt != "":
			t, err := time.Parse(time.RFC3339, runAt)
			if err != nil {
				return usagef("--run-at must be RFC 3339 (2006-01-02T15:04:05Z), got %q", runAt)
			}
			opts.RunAt = t
		case in < 0:
			return usagef("--in must not be negative")
		case in > 0:
			opts.RunAt = time.Now().Add(in)
		}
		if err := f.check(); err != nil {
			return err
		}
		opts.Queue, opts.Priority, opts.MaxAttempts, opts.Tags = queue, int16(priority), maxAttempts, tags
		pool, client, err := f.connect(ctx)
		if err != nil {
			return err
		}
		defer pool.Close()
		res, err := client.Enqueue(ctx, rawArgs{kind: kind, args: json.RawMessage(argsJSONValue)}, &opts)
		if err != nil {
			return err
		}
		if f.json {
			return writeJSON(stdout, newJobJSON(res.JobRow))
		}
		fmt.Fprintf(stdout, "enqueued job %d: kind %s, queue %s, %s\n", res.ID, res.Kind, res.Queue, res.State)
		return nil
	}()
	return finish("enqueue", enqueueUsage, err, stdout, stderr)
}
