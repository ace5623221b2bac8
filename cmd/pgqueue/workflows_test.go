package main

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

// TestWorkflowsShow shows a workflow as a table and as JSON, and resumes
// it with jobs retry after its first job was cancelled.
func TestWorkflowsShow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.DB().NewDatabase(t)
	pool, err := pgxpool.New(ctx, url)
	must(t, err)
	t.Cleanup(pool.Close)
	_, err = pgqueue.Migrate(ctx, pool, pgqueue.SchemaDefault)
	must(t, err)
	client, err := pgqueue.New(pool, nil)
	must(t, err)
	res, err := client.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
		{Args: opsJob{N: 1}, Opts: &pgqueue.EnqueueOpts{Name: "first"}},
		{Args: opsJob{N: 2}, Opts: &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnName("first")}}},
		{Args: opsJob{N: 3}, Opts: &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{
			pgqueue.DependsOnIndex(0).OnFailure(pgqueue.ParentFailureWait), pgqueue.DependsOnIndex(1)}}},
	})
	must(t, err)
	db := []string{"--database-url", url}
	wf := strconv.FormatInt(res.Workflow, 10)
	id := func(i int) string { return strconv.FormatInt(res.IDs[i], 10) }

	out := cli(t, exitOK, append([]string{"workflows", "show", wf}, db...)...)
	contains(t, out, "workflow "+wf+": 3 jobs, 2 blocked, 1 available", id(0)+"(wait),"+id(1))

	out = cli(t, exitOK, append([]string{"workflows", "show", wf, "--json"}, db...)...)
	var got workflowJSON
	must(t, json.Unmarshal([]byte(out), &got))
	if got.ID != res.Workflow || got.Done || len(got.Jobs) != 3 || len(got.Edges) != 3 ||
		got.Counts[pgqueue.StateBlocked] != 2 || got.Jobs[1].State != pgqueue.StateBlocked {
		t.Fatalf("--json: %s", out)
	}

	// The queue's counts show the blocked jobs too.
	out = cli(t, exitOK, append([]string{"queues", "list"}, db...)...)
	contains(t, out, "BLOCKED")
	out = cli(t, exitOK, append([]string{"queues", "list", "--json"}, db...)...)
	var qs []queueJSON
	must(t, json.Unmarshal([]byte(out), &qs))
	if len(qs) != 1 || qs[0].Blocked != 2 || qs[0].Available != 1 {
		t.Errorf("queues list --json: %s", out)
	}
	out = cli(t, exitOK, append([]string{"stats", "--json"}, db...)...)
	var s statsJSON
	must(t, json.Unmarshal([]byte(out), &s))
	if len(s.Queues) != 1 || s.Queues[0].Blocked != 2 {
		t.Errorf("stats --json: %s", out)
	}

	// The first job cancelled cancels the second (policy cancel), and the
	// second the third (which would have waited for the first alone).
	// Retrying the first from the CLI brings both back.
	_, err = client.JobCancel(ctx, res.IDs[0])
	must(t, err)
	out = cli(t, exitOK, append([]string{"workflows", "show", wf}, db...)...)
	contains(t, out, "3 jobs, 3 cancelled")
	cli(t, exitOK, append([]string{"jobs", "retry", id(0)}, db...)...)
	out = cli(t, exitOK, append([]string{"workflows", "show", wf}, db...)...)
	contains(t, out, "3 jobs, 2 blocked, 1 available")

	cli(t, exitNotFound, append([]string{"workflows", "show", "999999"}, db...)...)
	cli(t, exitUsage, append([]string{"workflows", "show"}, db...)...)
	cli(t, exitUsage, append([]string{"workflows", "show", "x"}, db...)...)
	cli(t, exitUsage, append([]string{"workflows", "list"}, db...)...)
	contains(t, cli(t, exitOK, "help", "workflows"), "pgqueue workflows show|cancel|retry ID")
	if _, err := client.JobList(ctx, &pgqueue.JobListParams{States: []pgqueue.JobState{pgqueue.StateBlocked}}); err != nil {
		t.Fatal(err)
	}
	contains(t, cli(t, exitOK, append([]string{"jobs", "list", "--state", "blocked"}, db...)...), id(1), id(2))

	// A whole workflow by --workflow: listed, cancelled and retried, and
	// nothing of another workflow or of none.
	other, err := client.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
		{Args: opsJob{N: 4}},
		{Args: opsJob{N: 5}, Opts: &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnIndex(0)}}},
	})
	must(t, err)
	alone, err := client.Enqueue(ctx, opsJob{N: 6}, nil)
	must(t, err)
	out = cli(t, exitOK, append([]string{"jobs", "list", "--workflow", wf, "--json"}, db...)...)
	var listed struct{ Jobs []jobJSON }
	must(t, json.Unmarshal([]byte(out), &listed))
	if len(listed.Jobs) != 3 || listed.Jobs[0].ID != res.IDs[2] {
		t.Fatalf("jobs list --workflow %s --json: %s", wf, out)
	}
	contains(t, cli(t, exitOK, append([]string{"jobs", "cancel", "--workflow", wf}, db...)...), "cancelled: 3\n")
	contains(t, cli(t, exitOK, append([]string{"workflows", "show", wf}, db...)...), "3 jobs, 3 cancelled")
	otherWF := strconv.FormatInt(other.Workflow, 10)
	contains(t, cli(t, exitOK, append([]string{"workflows", "show", otherWF}, db...)...), "2 jobs, 1 blocked, 1 available")
	if j, err := client.JobGet(ctx, alone.ID); err != nil || j.State != pgqueue.StateAvailable {
		t.Fatalf("the job of no workflow: %v, %v", j, err)
	}
	contains(t, cli(t, exitOK, append([]string{"jobs", "retry", "--workflow", wf}, db...)...), "retried: 3\n")
	contains(t, cli(t, exitOK, append([]string{"workflows", "show", wf}, db...)...), "3 jobs, 2 blocked, 1 available")
	cli(t, exitUsage, append([]string{"jobs", "cancel", "--workflow", "-4"}, db...)...)

	// workflows cancel: the other workflow's two jobs, then nothing left.
	contains(t, cli(t, exitOK, append([]string{"workflows", "cancel", otherWF}, db...)...), "cancelled: 2\n")
	contains(t, cli(t, exitOK, append([]string{"workflows", "show", otherWF}, db...)...), "2 jobs, 2 cancelled")
	contains(t, cli(t, exitOK, append([]string{"workflows", "cancel", otherWF, "--json"}, db...)...), `"done": 0`)
	contains(t, cli(t, exitOK, append([]string{"workflows", "retry", otherWF}, db...)...), "retried: 2\n")
	contains(t, cli(t, exitOK, append([]string{"workflows", "show", otherWF}, db...)...), "2 jobs, 1 blocked, 1 available")
	cli(t, exitNotFound, append([]string{"workflows", "cancel", "999999"}, db...)...)
	cli(t, exitUsage, append([]string{"workflows", "cancel"}, db...)...)
	contains(t, cli(t, exitOK, "help", "workflows"), "cancel ID")
}
