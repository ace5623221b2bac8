package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/pgqueue/pgqueue"
)

const workflowsUsage = `Usage: pgqueue workflows show|cancel|retry ID [flags]

Subcommands:

	show ID     a workflow (jobs that wait for other jobs, inserted with
	            dependencies): its jobs counted by state, then each job
	            with its state and the jobs it waits for (a * marks a
	            dependency that no longer holds it: the parent completed,
	            or failed under the "run" policy)
	cancel ID   cancel what of the workflow has not ended: blocked,
	            scheduled and available jobs at once, running ones through
	            their workers; 1000 jobs per statement; prints counts
	retry ID    retry the workflow's discarded and cancelled jobs: each
	            runs again, or waits (blocked) for the jobs it depends
	            on; 1000 jobs per statement; prints counts

Flags:

	--database-url URL  database (default: $DATABASE_URL)
	--schema NAME       schema of pgqueue's tables (default "pgqueue")
	--json              show: print JSON: id, counts, jobs (as jobs get
	                    --json) and edges (parent, child, on_failure,
	                    resolved); cancel and retry: the counts (done,
	                    cancel_requested, unchanged, running)

Exit codes: 0 ok; 1 failure; 2 usage; 3 no job belongs to the workflow.
`

// runWorkflows is the workflows command.
func runWorkflows(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return parseFailed("workflows", workflowsUsage, usagef("missing subcommand: show, cancel or retry"), stdout, stderr)
	}
	sub, rest := args[0], args[1:]
	var err error
	switch sub {
	case "show":
		err = workflowsShow(ctx, rest, stdout)
	case "cancel", "retry":
		err = workflowsControl(ctx, sub, rest, stdout)
	case "-h", "-help", "--help":
		fmt.Fprint(stdout, workflowsUsage)
		return exitOK
	default:
		err = usagef("unknown subcommand %q: want show, cancel or retry", sub)
	}
	return finish("workflows", workflowsUsage, err, stdout, stderr)
}

// workflowJSON is a workflow as show --json prints it.
type workflowJSON struct {
	ID     int64                    `json:"id"`
	Done   bool                     `json:"done"`
	Counts map[pgqueue.JobState]int `json:"counts"`
	Jobs   []*jobJSON               `json:"jobs"`
	Edges  []edgeJSON               `json:"edges"`
}

type edgeJSON struct {
	Parent    int64  `json:"parent"`
	Child     int64  `json:"child"`
	OnFailure string `json:"on_failure"`
	Resolved  bool   `json:"resolved"`
}

// workflowArgs parses the flags and the one workflow ID of subcommand
// sub, and connects.
func workflowArgs(ctx context.Context, sub string, args []string) (id int64, f readFlags, client *pgqueue.Client, done func(), err error) {
	fs := newFlagSet("workflows " + sub)
	f.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return 0, f, nil, nil, err
	}
	if len(pos) != 1 {
		return 0, f, nil, nil, usagef("%s takes one workflow ID", sub)
	}
	id, err = strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id <= 0 {
		return 0, f, nil, nil, usagef("invalid workflow ID %q", pos[0])
	}
	if err := f.check(); err != nil {
		return 0, f, nil, nil, err
	}
	pool, client, err := f.connect(ctx)
	if err != nil {
		return 0, f, nil, nil, err
	}
	return id, f, client, pool.Close, nil
}

// workflowsControl is workflows cancel and workflows retry.
func workflowsControl(ctx context.Context, verb string, args []string, stdout io.Writer) error {
	id, f, client, done, err := workflowArgs(ctx, verb, args)
	if err != nil {
		return err
	}
	defer done()
	act := client.WorkflowCancel
	if verb == "retry" {
		act = client.WorkflowRetry
	}
	res, err := act(ctx, id)
	if errors.Is(err, pgqueue.ErrWorkflowNotFound) {
		return &notFoundError{fmt.Sprintf("workflow %d not found", id)}
	}
	if err != nil {
		return err
	}
	c := controlCounts{Done: len(res.Changed), Requested: len(res.CancelRequested), Unchanged: len(res.Unchanged), Running: len(res.Running)}
	if f.json {
		return writeJSON(stdout, c)
	}
	fmt.Fprintf(stdout, "%s: %d\n", map[string]string{"cancel": "cancelled", "retry": "retried"}[verb], c.Done)
	printCount(stdout, "running, cancel requested (their workers stop them)", c.Requested)
	printCount(stdout, "changed meanwhile, unchanged", c.Unchanged)
	printCount(stdout, "running meanwhile, refused", c.Running)
	return nil
}

func workflowsShow(ctx context.Context, args []string, stdout io.Writer) error {
	id, f, client, done, err := workflowArgs(ctx, "show", args)
	if err != nil {
		return err
	}
	defer done()
	w, err := client.WorkflowGet(ctx, id)
	if errors.Is(err, pgqueue.ErrWorkflowNotFound) {
		return &notFoundError{fmt.Sprintf("workflow %d not found", id)}
	}
	if err != nil {
		return err
	}
	if f.json {
		out := workflowJSON{ID: w.ID, Done: w.Done(), Counts: w.Counts, Jobs: make([]*jobJSON, len(w.Jobs)), Edges: make([]edgeJSON, len(w.Edges))}
		for i, j := range w.Jobs {
			out.Jobs[i] = newJobJSON(j)
		}
		for i, e := range w.Edges {
			out.Edges[i] = edgeJSON{Parent: e.Parent, Child: e.Child, OnFailure: string(e.OnFailure), Resolved: e.Resolved}
		}
		return writeJSON(stdout, out)
	}
	printWorkflow(stdout, w)
	return nil
}

// printWorkflow prints the counts, then one line per job.
func printWorkflow(w io.Writer, wf *pgqueue.Workflow) {
	fmt.Fprintf(w, "workflow %d: %d jobs", wf.ID, len(wf.Jobs))
	states := []pgqueue.JobState{pgqueue.StateBlocked, pgqueue.StateScheduled, pgqueue.StateAvailable, pgqueue.StateRunning,
		pgqueue.StateCompleted, pgqueue.StateDiscarded, pgqueue.StateCancelled}
	for _, s := range states {
		if n := wf.Counts[s]; n > 0 {
			fmt.Fprintf(w, ", %d %s", n, s)
		}
	}
	fmt.Fprintln(w)
	parents := map[int64][]string{}
	for _, e := range wf.Edges {
		p := strconv.FormatInt(e.Parent, 10)
		if e.Resolved {
			p += "*"
		}
		if e.OnFailure != pgqueue.ParentFailureCancel {
			p += "(" + string(e.OnFailure) + ")"
		}
		parents[e.Child] = append(parents[e.Child], p)
	}
	t := newTable(w, "ID", "KIND", "QUEUE", "STATE", "ATTEMPT", "WAITS FOR")
	for _, j := range wf.Jobs {
		ps := parents[j.ID]
		slices.Sort(ps)
		waits := "-"
		if len(ps) > 0 {
			waits = joinLimited(ps, 8)
		}
		t.row(strconv.FormatInt(j.ID, 10), j.Kind, j.Queue, string(j.State), strconv.Itoa(j.Attempt), waits)
	}
	t.flush()
}

// joinLimited joins up to n of ss with commas and says how many more.
func joinLimited(ss []string, n int) string {
	if len(ss) <= n {
		return strings.Join(ss, ",")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ss[:n], ","), len(ss)-n)
}
