package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/pgqueue/pgqueue"
)

const jobsUsage = `Usage: pgqueue jobs <subcommand> [flags]

Inspects and controls jobs.

Subcommands:

	list            list jobs, newest first, a page at a time
	get ID          show one job: args, attempts, errors with their stacks,
	                fence, lease, output and progress
	retry ID...     run jobs again now (a job that used up its attempts
	                gets one more); running jobs are refused
	cancel ID...    cancel jobs; a running job's worker is asked to stop it
	delete ID...    delete jobs; running jobs are refused (cancel them first)

retry, cancel and delete take, instead of ids, the filters of list (or
--all for every job): they then act on every job that passes them, a
--batch of jobs (default 1000) per statement, and print counts.

Flags of list (filters combine; each list flag may be repeated or take
comma-separated values):

	--queue Q       only jobs of these queues
	--kind K        only jobs of these kinds
	--state S       only jobs in these states: blocked, scheduled,
	                available, running, completed, discarded, cancelled
	--tag T         only jobs carrying all of these tags
	--args JSON     only jobs whose args contain this JSON object
	--workflow ID   only the jobs of this workflow (cancel --workflow ID
	                cancels what of it has not ended)
	--created-after T, --created-before T
	--finalized-after T, --finalized-before T
	                time ranges; T is RFC 3339 or a duration ago (90m)
	--order O       id (default), created_at, run_at or finalized_at
	--asc           oldest first instead of newest first
	--limit N       page size (default 20, at most 10000)
	--cursor C      the page after the one that printed this cursor
	--all           every job, page after page (from --cursor, if given),
	                printed as it is read: memory stays that of one page
	--batch N       the page size of --all (default 1000, at most 10000)
	--ndjson        one JSON object per line, for jq and | head; a single
	                page's next cursor goes to stderr

Flags of every subcommand:

	--database-url URL  database (default: $DATABASE_URL)
	--schema NAME       schema of pgqueue's tables (default "pgqueue")
	--json              print JSON instead of a table (list --all: one
	                    array, written as it is read)

Exit codes: 0 ok; 1 failure (also: a job was running and refused);
2 usage; 3 a job named does not exist.
`

// runJobs is the jobs command.
func runJobs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return parseFailed("jobs", jobsUsage, usagef("missing subcommand: list, get, retry, cancel or delete"), stdout, stderr)
	}
	sub, rest := args[0], args[1:]
	var err error
	switch sub {
	case "list":
		err = jobsList(ctx, rest, stdout, stderr)
	case "get":
		err = jobsGet(ctx, rest, stdout)
	case "retry", "cancel", "delete":
		err = jobsControl(ctx, sub, rest, stdout)
	case "-h", "-help", "--help":
		fmt.Fprint(stdout, jobsUsage)
		return exitOK
	default:
		err = usagef("unknown subcommand %q: want list, get, retry, cancel or delete", sub)
	}
	return finish("jobs", jobsUsage, err, stdout, stderr)
}

// notFoundError is a job that does not exist: exit code 3.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

// refusedError is a failure whose lines were printed already: exit 1
// with its message.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

// finish turns a command's error into its exit code, printing it.
func finish(command, usage string, err error, stdout, stderr io.Writer) int {
	var (
		uerr  *usageError
		nferr *notFoundError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &uerr), errors.Is(err, flag.ErrHelp):
		return parseFailed(command, usage, err, stdout, stderr)
	case errors.As(err, &nferr):
		fmt.Fprintf(stderr, "pgqueue %s: %v\n", command, err)
		return exitNotFound
	default:
		fmt.Fprintf(stderr, "pgqueue %s: %v\n", command, err)
		return exitError
	}
}

// filterFlags are the job filters of list, and of retry, cancel and
// delete without ids: the fields of JobListParams that select jobs.
type filterFlags struct {
	queues, kinds, states, tags                listFlag
	argsJSON                                   string
	createdFrom, createdTo, finalFrom, finalTo timeFlag
	workflow                                   int64
}

func (f *filterFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.queues, "queue", "")
	fs.Var(&f.kinds, "kind", "")
	fs.Var(&f.states, "state", "")
	fs.Var(&f.tags, "tag", "")
	fs.StringVar(&f.argsJSON, "args", "", "")
	fs.Var(&f.createdFrom, "created-after", "")
	fs.Var(&f.createdTo, "created-before", "")
	fs.Var(&f.finalFrom, "finalized-after", "")
	fs.Var(&f.finalTo, "finalized-before", "")
	fs.Int64Var(&f.workflow, "workflow", 0, "")
}

// set reports whether any filter was given.
func (f *filterFlags) set() bool {
	return len(f.queues)+len(f.kinds)+len(f.states)+len(f.tags) > 0 || f.argsJSON != "" || f.workflow != 0 ||
		!f.createdFrom.t.IsZero() || !f.createdTo.t.IsZero() || !f.finalFrom.t.IsZero() || !f.finalTo.t.IsZero()
}

// apply checks the filters and sets them in p.
func (f *filterFlags) apply(p *pgqueue.JobListParams) error {
	for _, s := range f.states {
		switch st := pgqueue.JobState(s); st {
		case pgqueue.StateBlocked, pgqueue.StateScheduled, pgqueue.StateAvailable, pgqueue.StateRunning,
			pgqueue.StateCompleted, pgqueue.StateDiscarded, pgqueue.StateCancelled:
			p.States = append(p.States, st)
		default:
			return usagef("unknown --state %q", s)
		}
	}
	if f.argsJSON != "" {
		var obj map[string]any
		if err := json.Unmarshal([]byte(f.argsJSON), &obj); err != nil {
			return usagef("--args must be a JSON object: %v", err)
		}
		p.ArgsContain = json.RawMessage(f.argsJSON)
	}
	if f.workflow < 0 {
		return usagef("invalid --workflow %d", f.workflow)
	}
	p.Workflow = f.workflow
	p.Queues, p.Kinds, p.Tags = f.queues, f.kinds, f.tags
	p.CreatedFrom, p.CreatedBefore = f.createdFrom.t, f.createdTo.t
	p.FinalizedFrom, p.FinalizedBefore = f.finalFrom.t, f.finalTo.t
	return nil
}

// defaultBatch is the page size of --all and of retry, cancel and delete
// by filter: big enough that a round trip per page costs little, small
// enough that a page of full rows stays a few megabytes.
const defaultBatch = 1000

// jobsListArgs is a parsed jobs list command line.
type jobsListArgs struct {
	readFlags
	params pgqueue.JobListParams
	// all pages through every job that passes the filters, a page of
	// batch at a time, printing each as it comes.
	all    bool
	batch  int
	ndjson bool
}

func parseJobsList(args []string) (*jobsListArgs, error) {
	a := &jobsListArgs{}
	fs := newFlagSet("jobs list")
	a.register(fs)
	var (
		filters       filterFlags
		order, cursor string
		asc           bool
		limit         int
	)
	filters.register(fs)
	fs.StringVar(&order, "order", string(pgqueue.JobListOrderID), "")
	fs.BoolVar(&asc, "asc", false, "")
	fs.IntVar(&limit, "limit", 20, "")
	fs.StringVar(&cursor, "cursor", "", "")
	fs.BoolVar(&a.all, "all", false, "")
	fs.IntVar(&a.batch, "batch", defaultBatch, "")
	fs.BoolVar(&a.ndjson, "ndjson", false, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) > 0 {
		return nil, usagef("list takes no arguments, got %q", pos)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	switch {
	case limit < 1 || limit > pgqueue.MaxJobListLimit:
		return nil, usagef("--limit must be between 1 and %d", pgqueue.MaxJobListLimit)
	case a.batch < 1 || a.batch > pgqueue.MaxJobListLimit:
		return nil, usagef("--batch must be between 1 and %d", pgqueue.MaxJobListLimit)
	case a.all && given["limit"]:
		return nil, usagef("--limit is the size of one page; with --all, --batch sets the size of each")
	case given["batch"] && !a.all:
		return nil, usagef("--batch goes with --all")
	case a.json && a.ndjson:
		return nil, usagef("--json and --ndjson are exclusive")
	}
	switch o := pgqueue.JobListOrder(order); o {
	case pgqueue.JobListOrderID, pgqueue.JobListOrderCreatedAt, pgqueue.JobListOrderRunAt, pgqueue.JobListOrderFinalizedAt:
		a.params.OrderBy = o
	default:
		return nil, usagef("--order must be id, created_at, run_at or finalized_at, got %q", order)
	}
	if err := filters.apply(&a.params); err != nil {
		return nil, err
	}
	a.params.Descending = !asc
	a.params.Limit = limit
	if a.all {
		a.params.Limit = a.batch
	}
	a.params.Cursor = cursor
	return a, a.check()
}

func jobsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a, err := parseJobsList(args)
	if err != nil {
		return err
	}
	pool, client, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	if a.all {
		return jobsListAll(ctx, client, a, stdout)
	}
	res, err := client.JobList(ctx, &a.params)
	if errors.Is(err, pgqueue.ErrInvalid) {
		return usagef("--cursor: %v", err)
	}
	if err != nil {
		return err
	}
	switch {
	case a.ndjson:
		w := bufio.NewWriter(stdout)
		if err := writeNDJSON(w, res.Jobs); err != nil {
			return err
		}
		if res.NextCursor != "" {
			// Not a job: the next page's cursor goes where a reader of
			// the jobs will not take it for one.
			fmt.Fprintf(stderr, "next page: --cursor %s\n", res.NextCursor)
		}
		return w.Flush()
	case a.json:
		out := struct {
			Jobs       []*jobJSON `json:"jobs"`
			NextCursor string     `json:"next_cursor,omitempty"`
		}{Jobs: []*jobJSON{}, NextCursor: res.NextCursor}
		for _, j := range res.Jobs {
			out.Jobs = append(out.Jobs, newJobJSON(j))
		}
		return writeJSON(stdout, out)
	}
	printJobTable(stdout, res.Jobs)
	if len(res.Jobs) == 0 {
		fmt.Fprintln(stdout, "(no jobs)")
	}
	if res.NextCursor != "" {
		fmt.Fprintf(stdout, "next page: --cursor %s\n", res.NextCursor)
	}
	return nil
}

// jobsListAll prints every job that passes a's filters, a page of
// a.batch at a time: each page is read by keyset (JobList's cursor),
// printed and dropped before the next is read, so memory stays that of
// one page however many jobs there are. --json prints one JSON array,
// written as it goes; --ndjson one object per line; the table is aligned
// page by page.
func jobsListAll(ctx context.Context, client *pgqueue.Client, a *jobsListArgs, stdout io.Writer) error {
	w := bufio.NewWriterSize(stdout, 64<<10)
	n := 0
	err := eachPage(ctx, client, a.params, func(jobs []*pgqueue.JobRow) error {
		switch {
		case a.ndjson:
			if err := writeNDJSON(w, jobs); err != nil {
				return err
			}
		case a.json:
			for _, j := range jobs {
				sep := ",\n"
				if n == 0 {
					sep = "[\n"
				}
				n++
				b, err := json.Marshal(newJobJSON(j))
				if err != nil {
					return err
				}
				w.WriteString(sep)
				w.Write(b)
			}
		default:
			if len(jobs) > 0 {
				printJobTable(w, jobs)
			}
			n += len(jobs)
		}
		// A page at a time to the reader: `| head` sees rows at once, and
		// a reader gone ends the command at its next write (SIGPIPE).
		return w.Flush()
	})
	if err != nil {
		return err
	}
	switch {
	case a.json && n == 0:
		w.WriteString("[]\n")
	case a.json:
		w.WriteString("\n]\n")
	case !a.ndjson && n == 0:
		fmt.Fprintln(w, "(no jobs)")
	}
	return w.Flush()
}

// eachPage calls f with each page of the jobs that pass params, in its
// order, from its cursor on, until a page comes back without a next one.
func eachPage(ctx context.Context, client *pgqueue.Client, params pgqueue.JobListParams, f func([]*pgqueue.JobRow) error) error {
	for {
		res, err := client.JobList(ctx, &params)
		if errors.Is(err, pgqueue.ErrInvalid) {
			return usagef("--cursor: %v", err)
		}
		if err != nil {
			return err
		}
		if err := f(res.Jobs); err != nil {
			return err
		}
		if res.NextCursor == "" {
			return nil
		}
		params.Cursor = res.NextCursor
	}
}

// writeNDJSON writes jobs one JSON object per line.
func writeNDJSON(w io.Writer, jobs []*pgqueue.JobRow) error {
	enc := json.NewEncoder(w)
	for _, j := range jobs {
		if err := enc.Encode(newJobJSON(j)); err != nil {
			return err
		}
	}
	return nil
}

// printJobTable prints jobs as the table of jobs list.
func printJobTable(w io.Writer, jobs []*pgqueue.JobRow) {
	t := newTable(w, "ID", "STATE", "QUEUE", "KIND", "ATTEMPT", "CREATED", "RUN AT", "FINALIZED", "LAST ERROR")
	for _, j := range jobs {
		lastErr := "-"
		if n := len(j.Errors); n > 0 {
			lastErr = truncate(j.Errors[n-1].Error, 60)
		}
		t.row(strconv.FormatInt(j.ID, 10), string(j.State), j.Queue, j.Kind,
			fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts), when(j.CreatedAt), when(j.RunAt), when(j.FinalizedAt), lastErr)
	}
	t.flush()
}

// parseIDs reads job ids.
func parseIDs(pos []string) ([]int64, error) {
	ids := make([]int64, 0, len(pos))
	for _, p := range pos {
		id, err := strconv.ParseInt(p, 10, 64)
		if err != nil || id < 1 {
			return nil, usagef("a job ID is a whole number of at least 1, got %q", p)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func jobsGet(ctx context.Context, args []string, stdout io.Writer) error {
	var f readFlags
	fs := newFlagSet("jobs get")
	f.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("get takes one job ID")
	}
	ids, err := parseIDs(pos)
	if err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	pool, client, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	job, err := client.JobGet(ctx, ids[0])
	if errors.Is(err, pgqueue.ErrJobNotFound) {
		return &notFoundError{fmt.Sprintf("job %d not found", ids[0])}
	}
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(stdout, newJobJSON(job))
	}
	printJob(stdout, job)
	return nil
}

// printJob prints every field of job, one per line.
func printJob(w io.Writer, j *pgqueue.JobRow) {
	t := newTable(w, "id:", strconv.FormatInt(j.ID, 10))
	t.row("kind:", j.Kind)
	t.row("queue:", j.Queue)
	t.row("state:", string(j.State))
	t.row("attempt:", fmt.Sprintf("%d of %d", j.Attempt, j.MaxAttempts))
	t.row("priority:", strconv.Itoa(int(j.Priority)))
	t.row("fence:", strconv.FormatInt(j.Fence, 10))
	t.row("worker:", cmpDash(j.WorkerID))
	t.row("lease until:", when(j.LeaseUntil))
	t.row("created:", when(j.CreatedAt))
	t.row("run at:", when(j.RunAt))
	t.row("attempted:", when(j.AttemptedAt))
	t.row("finalized:", when(j.FinalizedAt))
	t.row("cancel requested:", when(j.CancelRequestedAt))
	t.row("singleton key:", cmpDash(j.SingletonKey))
	// The flow keys only when set: most jobs have none.
	if j.PartitionKey != "" {
		t.row("partition key:", j.PartitionKey)
	}
	if j.SequenceKey != "" {
		t.row("sequence key:", j.SequenceKey)
	}
	t.row("tags:", cmpDash(strings.Join(j.Tags, ", ")))
	t.flush()
	printJSONField(w, "args", j.EncodedArgs)
	printJSONField(w, "meta", j.Meta)
	printJSONField(w, "output", j.Output)
	printJSONField(w, "progress", j.Progress)
	if len(j.Errors) == 0 {
		fmt.Fprintln(w, "errors: none")
		return
	}
	fmt.Fprintln(w, "errors:")
	for _, e := range j.Errors {
		fmt.Fprintf(w, "  attempt %d at %s: %s\n", e.Attempt, when(e.At), e.Error)
		for line := range strings.SplitSeq(strings.TrimRight(e.Trace, "\n"), "\n") {
			if line != "" {
				fmt.Fprintf(w, "    %s\n", line)
			}
		}
	}
}

func cmpDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printJSONField prints a JSON column indented, or "none".
func printJSONField(w io.Writer, name string, raw []byte) {
	if len(raw) == 0 || string(raw) == "null" {
		fmt.Fprintf(w, "%s: none\n", name)
		return
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		fmt.Fprintf(w, "%s: %s\n", name, raw)
		return
	}
	b, _ := json.MarshalIndent(v, "  ", "  ")
	fmt.Fprintf(w, "%s:\n  %s\n", name, b)
}

// jobJSON is a job as --json prints it.
type jobJSON struct {
	ID                int64                  `json:"id"`
	Queue             string                 `json:"queue"`
	Kind              string                 `json:"kind"`
	Args              json.RawMessage        `json:"args"`
	Priority          int16                  `json:"priority"`
	State             pgqueue.JobState       `json:"state"`
	Attempt           int                    `json:"attempt"`
	MaxAttempts       int                    `json:"max_attempts"`
	RunAt             time.Time              `json:"run_at"`
	Fence             int64                  `json:"fence"`
	LeaseUntil        *time.Time             `json:"lease_until"`
	WorkerID          string                 `json:"worker_id"`
	Errors            []pgqueue.AttemptError `json:"errors"`
	Tags              []string               `json:"tags"`
	Meta              json.RawMessage        `json:"meta"`
	CreatedAt         time.Time              `json:"created_at"`
	AttemptedAt       *time.Time             `json:"attempted_at"`
	FinalizedAt       *time.Time             `json:"finalized_at"`
	SingletonKey      string                 `json:"singleton_key,omitempty"`
	PartitionKey      string                 `json:"partition_key,omitempty"`
	SequenceKey       string                 `json:"sequence_key,omitempty"`
	CancelRequestedAt *time.Time             `json:"cancel_requested_at"`
	Output            json.RawMessage        `json:"output"`
	Progress          json.RawMessage        `json:"progress"`
}

func newJobJSON(j *pgqueue.JobRow) *jobJSON {
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	raw := func(b []byte) json.RawMessage {
		if len(b) == 0 {
			return json.RawMessage("null")
		}
		return b
	}
	errs := j.Errors
	if errs == nil {
		errs = []pgqueue.AttemptError{}
	}
	tags := j.Tags
	if tags == nil {
		tags = []string{}
	}
	return &jobJSON{
		ID: j.ID, Queue: j.Queue, Kind: j.Kind, Args: raw(j.EncodedArgs), Priority: j.Priority, State: j.State,
		Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, RunAt: j.RunAt, Fence: j.Fence, LeaseUntil: opt(j.LeaseUntil),
		WorkerID: j.WorkerID, Errors: errs, Tags: tags, Meta: raw(j.Meta), CreatedAt: j.CreatedAt,
		AttemptedAt: opt(j.AttemptedAt), FinalizedAt: opt(j.FinalizedAt), SingletonKey: j.SingletonKey,
		PartitionKey: j.PartitionKey, SequenceKey: j.SequenceKey,
		CancelRequestedAt: opt(j.CancelRequestedAt), Output: raw(j.Output), Progress: raw(j.Progress),
	}
}

// controlResult is what retry, cancel or delete did with each id.
type controlResult struct {
	// Done holds the jobs retried, cancelled or deleted.
	Done []int64 `json:"done"`
	// Unchanged holds jobs left as they were: retry of an available job,
	// cancel of a finished one.
	Unchanged []int64 `json:"unchanged"`
	// Requested holds running jobs whose cancel was requested (cancel).
	Requested []int64 `json:"cancel_requested"`
	// Running holds running jobs refused (retry, delete).
	Running []int64 `json:"running"`
	// NotFound holds ids no job has.
	NotFound []int64 `json:"not_found"`
}

func jobsControl(ctx context.Context, verb string, args []string, stdout io.Writer) error {
	var (
		f       readFlags
		filters filterFlags
		all     bool
		batch   int
	)
	fs := newFlagSet("jobs " + verb)
	f.register(fs)
	filters.register(fs)
	fs.BoolVar(&all, "all", false, "")
	fs.IntVar(&batch, "batch", defaultBatch, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	byFilter := all || filters.set()
	switch {
	case len(pos) > 0 && byFilter:
		return usagef("%s takes job IDs or filters (with --all for every job), not both", verb)
	case len(pos) == 0 && !byFilter:
		return usagef("%s takes one or more job IDs, or filters (--queue, --kind, --state, ...) or --all", verb)
	case batch < 1 || batch > pgqueue.MaxJobListLimit:
		return usagef("--batch must be between 1 and %d", pgqueue.MaxJobListLimit)
	}
	var params pgqueue.JobListParams
	if err := filters.apply(&params); err != nil {
		return err
	}
	ids, err := parseIDs(pos)
	if err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	pool, client, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	if byFilter {
		params.Limit = batch
		return jobsControlByFilter(ctx, client, verb, params, f.json, stdout)
	}

	res := controlResult{Done: []int64{}, Unchanged: []int64{}, Requested: []int64{}, Running: []int64{}, NotFound: []int64{}}
	switch verb {
	case "retry":
		m, err := client.JobRetryMany(ctx, ids)
		if err != nil {
			return err
		}
		res.Done, res.Unchanged, res.Running, res.NotFound = orEmpty(m.Changed), orEmpty(m.Unchanged), orEmpty(m.Running), orEmpty(m.NotFound)
	case "delete":
		m, err := client.JobDeleteMany(ctx, ids)
		if err != nil {
			return err
		}
		res.Done, res.Running, res.NotFound = orEmpty(m.Changed), orEmpty(m.Running), orEmpty(m.NotFound)
	case "cancel":
		for _, id := range ids {
			job, err := client.JobCancel(ctx, id)
			switch {
			case errors.Is(err, pgqueue.ErrJobNotFound):
				res.NotFound = append(res.NotFound, id)
			case err != nil:
				return err
			case job.State == pgqueue.StateRunning:
				res.Requested = append(res.Requested, id)
			case job.State == pgqueue.StateCancelled: // now, or before this call
				res.Done = append(res.Done, id)
			default:
				res.Unchanged = append(res.Unchanged, id)
			}
		}
	}
	if f.json {
		if err := writeJSON(stdout, res); err != nil {
			return err
		}
	} else {
		done := map[string]string{"retry": "retried", "cancel": "cancelled", "delete": "deleted"}[verb]
		unchanged := map[string]string{"retry": "already available or blocked", "cancel": "already completed or discarded, unchanged"}[verb]
		printIDs(stdout, done, res.Done)
		printIDs(stdout, unchanged, res.Unchanged)
		printIDs(stdout, "running, cancel requested (its worker stops it)", res.Requested)
		printIDs(stdout, "running, refused (cancel it first)", res.Running)
		printIDs(stdout, "not found", res.NotFound)
	}
	switch {
	case len(res.NotFound) > 0:
		return &notFoundError{fmt.Sprintf("%d of %d jobs not found", len(res.NotFound), len(ids))}
	case len(res.Running) > 0:
		return &refusedError{fmt.Sprintf("%d of %d jobs running, refused", len(res.Running), len(ids))}
	}
	return nil
}

// controlCounts is what retry, cancel or delete by filter did: the
// counts of controlResult's lists.
type controlCounts struct {
	Done      int `json:"done"`
	Unchanged int `json:"unchanged"`
	Requested int `json:"cancel_requested"`
	Running   int `json:"running"`
}

// jobsControlByFilter retries, cancels or deletes every job that passes
// params' filters, a batch of params.Limit at a time: each batch is the
// next page by id (JobList's keyset, so a job changed by one batch is not
// met again, and memory stays that of one page) and one statement
// (JobRetryMany, JobCancelMany, JobDeleteMany) in its own transaction. It
// prints counts, not ids.
func jobsControlByFilter(ctx context.Context, client *pgqueue.Client, verb string, params pgqueue.JobListParams, asJSON bool, stdout io.Writer) error {
	params.OrderBy, params.Descending = pgqueue.JobListOrderID, false
	var c controlCounts
	err := eachPage(ctx, client, params, func(jobs []*pgqueue.JobRow) error {
		if len(jobs) == 0 {
			return nil
		}
		ids := make([]int64, len(jobs))
		for i, j := range jobs {
			ids[i] = j.ID
		}
		var m *pgqueue.JobManyResult
		var err error
		switch verb {
		case "retry":
			m, err = client.JobRetryMany(ctx, ids)
		case "cancel":
			m, err = client.JobCancelMany(ctx, ids)
		case "delete":
			m, err = client.JobDeleteMany(ctx, ids)
		}
		if err != nil {
			return err
		}
		// A job gone between the page and its batch (deleted by another)
		// is not counted: it no longer passes the filters.
		c.Done += len(m.Changed)
		c.Unchanged += len(m.Unchanged)
		c.Requested += len(m.CancelRequested)
		c.Running += len(m.Running)
		return nil
	})
	if err != nil {
		return err
	}
	if asJSON {
		if err := writeJSON(stdout, c); err != nil {
			return err
		}
	} else {
		done := map[string]string{"retry": "retried", "cancel": "cancelled", "delete": "deleted"}[verb]
		fmt.Fprintf(stdout, "%s: %d\n", done, c.Done)
		printCount(stdout, map[string]string{"retry": "already available or blocked", "cancel": "already completed, discarded or cancelled, unchanged"}[verb], c.Unchanged)
		printCount(stdout, "running, cancel requested (their workers stop them)", c.Requested)
		printCount(stdout, "running, refused (cancel them first)", c.Running)
	}
	if c.Running > 0 {
		return &refusedError{fmt.Sprintf("%d jobs running, refused", c.Running)}
	}
	return nil
}

func printCount(w io.Writer, label string, n int) {
	if n > 0 {
		fmt.Fprintf(w, "%s: %d\n", label, n)
	}
}

func orEmpty(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}

func printIDs(w io.Writer, label string, ids []int64) {
	if len(ids) == 0 {
		return
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	fmt.Fprintf(w, "%s: %s\n", label, strings.Join(s, " "))
}
