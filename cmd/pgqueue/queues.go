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

Inspects, pauses and resumes queues.

Subcommands:

	list            every queue with unfinished jobs or a pause: paused or
	                not, scheduled, available and running jobs, and how long
	                the oldest available job has waited
	pause NAME...   stop every client of the schema from claiming the
	                queues' jobs (running jobs finish; enqueues still work)
	resume NAME...  let them claim again, at once

Flags:

	--database-url URL  database (default: $DATABASE_URL)
	--schema NAME       schema of pgqueue's tables (default "pgqueue")
	--json              list: print JSON instead of a table
`

func runQueues(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return parseFailed("queues", queuesUsage, usagef("missing subcommand: list, pause or resume"), stdout, stderr)
	}
	sub, rest := args[0], args[1:]
	var err error
	switch sub {
	case "list":
		err = queuesList(ctx, rest, stdout)
	case "pause", "resume":
		err = queuesControl(ctx, sub, rest, stdout)
	case "-h", "-help", "--help":
		fmt.Fprint(stdout, queuesUsage)
		return exitOK
	default:
		err = usagef("unknown subcommand %q: want list, pause or resume", sub)
	}
	return finish("queues", queuesUsage, err, stdout, stderr)
}

// queueJSON is a queue as --json prints it.
type queueJSON struct {
	Name                 string     `json:"name"`
	Paused               bool       `json:"paused"`
	PausedAt             *time.Time `json:"paused_at"`
	Scheduled            int64      `json:"scheduled"`
	Available            int64      `json:"available"`
	Running              int64      `json:"running"`
	OldestAvailableAt    *time.Time `json:"oldest_available_at"`
	OldestAvailableAgeMS int64      `json:"oldest_available_age_ms"`
}

func newQueueJSON(q *pgqueue.QueueInfo) queueJSON {
	out := queueJSON{Name: q.Name, Paused: q.Paused, Scheduled: q.Scheduled, Available: q.Available,
		Running: q.Running, OldestAvailableAgeMS: q.OldestAvailableAge.Milliseconds()}
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
	t := newTable(stdout, "QUEUE", "PAUSED", "SCHEDULED", "AVAILABLE", "RUNNING", "OLDEST AVAILABLE")
	for _, q := range qs {
		t.row(q.Name, yesNo(q.Paused), strconv.FormatInt(q.Scheduled, 10), strconv.FormatInt(q.Available, 10),
			strconv.FormatInt(q.Running, 10), age(q.OldestAvailableAge))
	}
	t.flush()
	if len(qs) == 0 {
		fmt.Fprintln(stdout, "(no queue has unfinished jobs or a pause)")
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
