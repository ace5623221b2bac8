package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/pgqueue/pgqueue"
)

const queuesUsage = `Usage: pgqueue queues <subcommand> [flags]

Inspects, pauses and resumes queues, and shows and sets their flow limits.

Subcommands:

	list            every queue with unfinished jobs, a pause or limits:
	                paused or not, scheduled, available and running jobs,
	                how long the oldest available job has waited, and its
	                limits (max=N key-max=N rate=N/P or key-rate=N/P
	                by=... seq=continue; "-" for none)
	pause NAME...   stop every client of the schema from claiming the
	                queues' jobs (running jobs finish; enqueues still work)
	resume NAME...  let them claim again, at once
	limit NAME      set the queue's flow limits: every client obeys them
	                from the commit on. The flags state the whole new
	                limits: a flag left out is no limit, whatever the queue
	                had. --clear removes them all. Prints the stored limits.
	limits NAME     the queue's limits, and its available jobs counted by
	                what holds them back (a sequence, a key's limit or
	                rate) or ready; reads every available job of the queue

Flags of limit:

	--max-running N          at most N jobs of the queue running at once,
	                         across every client (N >= 1)
	--max-running-per-key N  at most N running per partition key
	--rate N/PERIOD          at most N starts within any PERIOD: 100/1m,
	                         10/s, 5/1h30m (PERIOD at least 1ms)
	--rate-per-key           count each partition key's starts apart
	--partition-by LIST      derive the key of jobs enqueued without one
	                         from kind and up to four args fields:
	                         kind,args.customer_id
	--sequence-continue      a discarded or cancelled job of a sequence
	                         releases the next one (by default it holds
	                         the sequence until retried or deleted)
	--clear                  remove every limit (given alone)

docs/concepts/flow-control.md says what each limit guarantees.

Flags:

	--database-url URL  database (default: $DATABASE_URL)
	--schema NAME       schema of pgqueue's tables (default "pgqueue")
	--json              list, limit, limits: print JSON instead of text
`

func runQueues(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return parseFailed("queues", queuesUsage, usagef("missing subcommand: list, pause, resume, limit or limits"), stdout, stderr)
	}
	sub, rest := args[0], args[1:]
	var err error
	switch sub {
	case "list":
		err = queuesList(ctx, rest, stdout)
	case "pause", "resume":
		err = queuesControl(ctx, sub, rest, stdout)
	case "limit":
		err = queuesLimit(ctx, rest, stdout)
	case "limits":
		err = queuesLimits(ctx, rest, stdout)
	case "-h", "-help", "--help":
		fmt.Fprint(stdout, queuesUsage)
		return exitOK
	default:
		err = usagef("unknown subcommand %q: want list, pause, resume, limit or limits", sub)
	}
	return finish("queues", queuesUsage, err, stdout, stderr)
}

// queueJSON is a queue as --json prints it.
type queueJSON struct {
	Name                 string     `json:"name"`
	Paused               bool       `json:"paused"`
	PausedAt             *time.Time `json:"paused_at"`
	Blocked              int64      `json:"blocked"`
	Scheduled            int64      `json:"scheduled"`
	Available            int64      `json:"available"`
	Running              int64      `json:"running"`
	OldestAvailableAt    *time.Time `json:"oldest_available_at"`
	OldestAvailableAgeMS int64      `json:"oldest_available_age_ms"`
	Limits               limitsJSON `json:"limits"`
}

func newQueueJSON(q *pgqueue.QueueInfo) queueJSON {
	out := queueJSON{Name: q.Name, Paused: q.Paused, Blocked: q.Blocked, Scheduled: q.Scheduled, Available: q.Available,
		Running: q.Running, OldestAvailableAgeMS: q.OldestAvailableAge.Milliseconds(), Limits: newLimitsJSON(q.Limits)}
	if q.Paused {
		out.PausedAt = &q.PausedAt
	}
	if !q.OldestAvailableAt.IsZero() {
		out.OldestAvailableAt = &q.OldestAvailableAt
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func queuesList(ctx context.Context, args []string, stdout io.Writer) error {
	var f readFlags
	fs := newFlagSet("queues list")
	f.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("list takes no arguments, got %q", pos)
	}
	if err := f.check(); err != nil {
		return err
	}
	pool, client, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	qs, err := client.QueueList(ctx)
	if err != nil {
		return err
	}
	if f.json {
		out := make([]queueJSON, 0, len(qs))
		for _, q := range qs {
			out = append(out, newQueueJSON(q))
		}
		return writeJSON(stdout, out)
	}
	t := newTable(stdout, "QUEUE", "PAUSED", "BLOCKED", "SCHEDULED", "AVAILABLE", "RUNNING", "OLDEST AVAILABLE", "LIMITS")
	for _, q := range qs {
		t.row(q.Name, yesNo(q.Paused), strconv.FormatInt(q.Blocked, 10), strconv.FormatInt(q.Scheduled, 10), strconv.FormatInt(q.Available, 10),
			strconv.FormatInt(q.Running, 10), age(q.OldestAvailableAge), truncate(compactLimits(q.Limits), 120))
	}
	t.flush()
	if len(qs) == 0 {
		fmt.Fprintln(stdout, "(no queue has unfinished jobs, a pause or limits)")
	}
	return nil
}

func queuesControl(ctx context.Context, verb string, args []string, stdout io.Writer) error {
	var f dbFlags
	fs := newFlagSet("queues " + verb)
	f.register(fs, pgqueue.SchemaDefault)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("%s takes one or more queue names", verb)
	}
	if err := f.check(); err != nil {
		return err
	}
	pool, client, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	for _, name := range pos {
		if verb == "pause" {
			err = client.QueuePause(ctx, name)
		} else {
			err = client.QueueResume(ctx, name)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%sd %s\n", verb, name)
	}
	return nil
}
