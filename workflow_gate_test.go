package pgqueue_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// fanOut enqueues a root and n children depending on it alone, in queue
// (the root in the default queue), and returns the root's id, then the
// children's.
func (b *workflowBundle) fanOut(t *testing.T, n int, queue string) []int64 {
	t.Helper()
	params := []pgqueue.EnqueueManyParams{{Args: noteArgs{}, Opts: &pgqueue.EnqueueOpts{Name: "root"}}}
	for i := 1; i <= n; i++ {
		params = append(params, pgqueue.EnqueueManyParams{Args: noteArgs{N: i},
			Opts: &pgqueue.EnqueueOpts{Queue: queue, DependsOn: []pgqueue.Dependency{pgqueue.DependsOnName("root")}}})
	}
	res, err := b.client.EnqueueMany(context.Background(), params)
	must(t, err)
	return res.IDs
}

// gate returns whether parent's gate for queue exists and whether it is
// open.
func (b *workflowBundle) gate(t *testing.T, parent int64, queue string) (exists, open bool) {
	t.Helper()
	must(t, b.pool.QueryRow(context.Background(), `
		SELECT count(*) > 0, coalesce(bool_or(opened_at IS NOT NULL), false)
		FROM pgqueue.job_gates WHERE parent_id = $1 AND queue = $2`, parent, queue).Scan(&exists, &open))
	return exists, open
}

// rowStates returns the states of ids as their rows hold them (a child
// of an open gate: blocked, unwritten).
func (b *workflowBundle) rowStates(t *testing.T, ids ...int64) []string {
	t.Helper()
	var out []string
	must(t, b.pool.QueryRow(context.Background(), `
		SELECT array_agg(j.state ORDER BY o.n) FROM unnest($1::bigint[]) WITH ORDINALITY o(id, n)
		JOIN pgqueue.jobs j ON j.id = o.id`, ids).Scan(&out))
	return out
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestWorkflowGates checks the release of a job with one parent through
// its parent's gate: opened only by the fenced completion, once; the
// children claimed from blocked without a write of their own; failure,
// retry, delete, pause and flow limits as for an edge.
func TestWorkflowGates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// A stale completion opens nothing; the fenced one opens the gate
	// and writes no child; the children are then claimed straight from
	// blocked, ahead of later-priority available jobs, each once.
	t.Run("FencedCompletionOpensTheGate", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		ids := b.fanOut(t, 5, "")
		root, kids := ids[0], ids[1:]
		if exists, open := b.gate(t, root, pgqueue.QueueDefault); !exists || open {
			t.Fatalf("gate after the insert: exists %v, open %v; want a closed one", exists, open)
		}
		var edges int
		must(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM pgqueue.job_deps").Scan(&edges))
		if edges != 0 {
			t.Fatalf("%d rows in job_deps for children with one parent each, want none (the gate is their edge)", edges)
		}
		jobs := b.claim(t)
		stale := *jobs[0]
		stale.Fence--
		if n, err := pgqueue.Complete(ctx, b.client, []*pgqueue.JobRow{&stale}); err != nil || n != 0 {
			t.Fatalf("stale completion: %d, %v", n, err)
		}
		if _, open := b.gate(t, root, pgqueue.QueueDefault); open {
			t.Fatal("a stale completion opened the gate")
		}
		b.wantStates(t, kids, repeat("blocked", 5)...)

		b.complete(t, jobs[0])
		if _, open := b.gate(t, root, pgqueue.QueueDefault); !open {
			t.Fatal("the fenced completion left the gate closed")
		}
		b.wantStates(t, kids, repeat("available", 5)...)
		if got := b.rowStates(t, kids...); !slices.Equal(got, repeat("blocked", 5)) {
			t.Fatalf("rows of the children %v: the opening wrote them", got)
		}
		// A claim of two leaves the gate to the three still waiting.
		first, err := pgqueue.Claim(ctx, b.client, pgqueue.QueueDefault, 2)
		must(t, err)
		if exists, _ := b.gate(t, root, pgqueue.QueueDefault); !exists {
			t.Fatal("a claim deleted the gate while children waited behind it")
		}
		// A later job of a later priority comes after the gate's children.
		late, err := b.client.Enqueue(ctx, noteArgs{N: 99}, &pgqueue.EnqueueOpts{Priority: 5})
		must(t, err)
		rest, err := pgqueue.Claim(ctx, b.client, pgqueue.QueueDefault, 10)
		must(t, err)
		var got []int64
		for _, j := range append(first, rest...) {
			got = append(got, j.ID)
			if j.ID != late.ID && j.Attempt != 1 {
				t.Errorf("child %d claimed at attempt %d", j.ID, j.Attempt)
			}
		}
		if want := append(slices.Clone(kids), late.ID); !slices.Equal(got, want) {
			t.Fatalf("claimed %v, want the gate's children in order, then the later job: %v", got, want)
		}
		if exists, _ := b.gate(t, root, pgqueue.QueueDefault); exists {
			t.Fatal("the claim that took the gate's last children left the gate")
		}
		var pending int
		must(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM pgqueue.jobs WHERE id = ANY($1) AND pending_parents = 0", kids).Scan(&pending))
		if pending != 5 {
			t.Fatalf("%d of 5 claimed children have pending_parents 0", pending)
		}
		b.complete(t, append(first, rest...)...)

		w, err := b.client.WorkflowGet(ctx, b.workflowOf(t, root))
		must(t, err)
		if len(w.Edges) != 5 {
			t.Fatalf("workflow edges %+v, want the 5 gates", w.Edges)
		}
		for _, e := range w.Edges {
			if e.Parent != root || !e.Resolved || e.OnFailure != pgqueue.ParentFailureCancel {
				t.Fatalf("edge %+v", e)
			}
		}
	})

	// A claim that passes over a child locked by another transaction
	// (before the rows it takes, in claim order) leaves the gate: had it
	// gone, that child, back to waiting when the other transaction ends,
	// would wait behind no gate, never claimed.
	t.Run("ChildLockedElsewhereKeepsTheGate", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		ids := b.fanOut(t, 4, "")
		root, kids := ids[0], ids[1:]
		b.complete(t, b.claim(t)...)
		tx, err := b.pool.Begin(ctx)
		must(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		must(t, tx.QueryRow(ctx, "SELECT id FROM pgqueue.jobs WHERE id = $1 FOR UPDATE", kids[0]).Scan(new(int64)))

		taken, err := pgqueue.Claim(ctx, b.client, pgqueue.QueueDefault, 10)
		must(t, err)
		if got := jobIDs(taken); !slices.Equal(got, kids[1:]) {
			t.Fatalf("claimed %v with the first child locked, want the others %v", got, kids[1:])
		}
		if exists, _ := b.gate(t, root, pgqueue.QueueDefault); !exists {
			t.Fatal("the claim deleted the gate while a child it passed over still waited")
		}
		must(t, tx.Rollback(ctx))
		last, err := pgqueue.Claim(ctx, b.client, pgqueue.QueueDefault, 10)
		must(t, err)
		if len(last) != 1 || last[0].ID != kids[0] {
			t.Fatalf("claimed %d jobs after the lock went, want the child it held (%d)", len(last), kids[0])
		}
		if exists, _ := b.gate(t, root, pgqueue.QueueDefault); exists {
			t.Fatal("the claim that took the gate's last child left the gate")
		}
		b.complete(t, append(taken, last...)...)
	})

	// A claim passes over a gate whose waiting children another claim
	// holds, to the next open gate: the oldest gate with a child no one
	// holds, not the oldest with a child.
	t.Run("ClaimPassesAGateHeldByAnotherClaim", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		first := b.fanOut(t, 3, "gated")
		second := b.fanOut(t, 3, "gated")
		roots := b.claim(t)
		if len(roots) != 2 || roots[0].ID != first[0] || roots[1].ID != second[0] {
			t.Fatalf("claimed %v, want the two roots", roots)
		}
		b.complete(t, roots...) // one transaction: the first gate is the older (by parent)
		tx, err := b.pool.Begin(ctx)
		must(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		// Another claim, in flight, holds the first gate's children.
		_, err = tx.Exec(ctx, "SELECT id FROM pgqueue.jobs WHERE id = ANY($1) FOR UPDATE", first[1:])
		must(t, err)

		taken, err := pgqueue.Claim(ctx, b.client, "gated", 10)
		must(t, err)
		if got := jobIDs(taken); !slices.Equal(got, second[1:]) {
			t.Fatalf("claimed %v while another claim held the first gate's children, want the second gate's %v", got, second[1:])
		}
		must(t, tx.Rollback(ctx))
		rest, err := pgqueue.Claim(ctx, b.client, "gated", 10)
		must(t, err)
		if len(rest) != 3 || rest[0].ID != first[1] {
			t.Fatalf("claimed %v once the first gate's children were free, want them", rest)
		}
		b.complete(t, append(taken, rest...)...)
	})

	// A parent taken over (its claim's lease lost) and run again opens
	// its gate once: the old holder's completion is refused, and a
	// completion after a retry of the completed parent opens nothing new.
	t.Run("RescuedParentOpensOnce", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		ids := b.fanOut(t, 2, "")
		old := b.claim(t)[0]
		_, err := b.pool.Exec(ctx, "UPDATE pgqueue.jobs SET state = 'available' WHERE id = $1", ids[0]) // as the rescuer leaves it
		must(t, err)
		again := b.claim(t)
		if len(again) != 1 || again[0].ID != ids[0] {
			t.Fatalf("claimed again %v", again)
		}
		if n, err := pgqueue.Complete(ctx, b.client, []*pgqueue.JobRow{old}); err != nil || n != 0 {
			t.Fatalf("the old holder's completion: %d, %v", n, err)
		}
		b.wantStates(t, ids[1:], "blocked", "blocked")
		b.complete(t, again[0])
		var opened time.Time
		must(t, b.pool.QueryRow(ctx, "SELECT opened_at FROM pgqueue.job_gates WHERE parent_id = $1", ids[0]).Scan(&opened))
		kids := b.claim(t)
		if len(kids) != 2 {
			t.Fatalf("claimed %d children, want 2", len(kids))
		}
		_, err = b.client.JobRetry(ctx, ids[0])
		must(t, err)
		b.complete(t, b.claim(t)...)
		b.wantStates(t, ids[1:], "running", "running")
		b.complete(t, kids...)
		if n := countJobs(t, b.pool, "state = 'completed'"); n != 3 {
			t.Fatalf("%d jobs completed, want 3", n)
		}
	})

	// A discarded parent cancels the children behind its closed gate;
	// retrying it brings them back, and its completion then opens it.
	t.Run("DiscardedParentCancelsAndRetryResumes", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		ids := b.fanOut(t, 3, "")
		jobs := b.claim(t)
		if took, err := pgqueue.Finish(ctx, b.client, jobs[0], "discard", 0); err != nil || !took {
			t.Fatalf("discard: %v %v", took, err)
		}
		b.wantStates(t, ids, "discarded", "cancelled", "cancelled", "cancelled")
		_, err := b.client.JobRetry(ctx, ids[0])
		must(t, err)
		b.wantStates(t, ids, "available", "blocked", "blocked", "blocked")
		b.complete(t, b.claim(t)...)
		b.wantStates(t, ids[1:], "available", "available", "available")
	})

	// A child cancelled while its gate was closed and retried after the
	// gate opened and emptied does not wait for a parent that completed:
	// a gate gone holds nothing.
	t.Run("CancelledChildRetriedAfterTheGate", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		ids := b.fanOut(t, 2, "")
		_, err := b.client.JobCancel(ctx, ids[1])
		must(t, err)
		b.complete(t, b.claim(t)...) // the root
		b.complete(t, b.claim(t)...) // the other child; the gate empties
		if exists, _ := b.gate(t, ids[0], pgqueue.QueueDefault); exists {
			t.Fatal("an emptied gate left")
		}
		_, err = b.client.JobRetry(ctx, ids[1])
		must(t, err)
		b.wantStates(t, ids[1:2], "available")
		if got := b.rowStates(t, ids[1]); got[0] != "available" {
			t.Fatalf("the retried child's row is %s, want available", got[0])
		}
		// Retried while its gate is still closed, it waits behind it.
		c := setupWorkflow(t)
		ids = c.fanOut(t, 1, "")
		_, err = c.client.JobCancel(ctx, ids[1])
		must(t, err)
		_, err = c.client.JobRetry(ctx, ids[1])
		must(t, err)
		c.wantStates(t, ids, "available", "blocked")
		c.complete(t, c.claim(t)...)
		c.wantStates(t, ids[1:], "available")
	})

	// Deleting the parent releases the children behind its gate, which
	// goes with it.
	t.Run("DeletedParentReleases", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		ids := b.fanOut(t, 2, "")
		_, err := b.client.JobDelete(ctx, ids[0])
		must(t, err)
		b.wantStates(t, ids[1:], "available", "available")
		if got := b.rowStates(t, ids[1:]...); !slices.Equal(got, []string{"available", "available"}) {
			t.Fatalf("rows %v, want the children written available", got)
		}
		if exists, _ := b.gate(t, ids[0], pgqueue.QueueDefault); exists {
			t.Fatal("the gate outlived its parent")
		}
	})

	// A paused queue gives nothing from an open gate either; resumed, it
	// does.
	t.Run("PausedQueue", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		ids := b.fanOut(t, 2, "gated")
		b.complete(t, b.claim(t)...)
		must(t, b.client.QueuePause(ctx, "gated"))
		if jobs, err := pgqueue.Claim(ctx, b.client, "gated", 10); err != nil || len(jobs) != 0 {
			t.Fatalf("claimed %d jobs of a paused queue, %v", len(jobs), err)
		}
		must(t, b.client.QueueResume(ctx, "gated"))
		jobs, err := pgqueue.Claim(ctx, b.client, "gated", 10)
		must(t, err)
		if len(jobs) != 2 || jobs[0].ID != ids[1] {
			t.Fatalf("claimed %v after the resume", jobs)
		}
	})

	// The poll, the fallback for notifications missed or never heard,
	// sees an open gate's children as work: a client that hears no
	// notification (PollOnly here; a claim of the children rolled back
	// by a killed connection notifies no one either) runs them, although
	// no job of its queue is available in its row.
	t.Run("PollFindsAnOpenGate", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		startClient(t, b.pool, countingNoteWorkers(t, nil), &pgqueue.Config{PollOnly: true,
			Queues: map[string]pgqueue.QueueConfig{"polled": {MaxWorkers: 4}}})
		// Once this job ran, the client's first claim is behind it: the
		// gate opens while its producer waits for a poll.
		warm, err := b.client.Enqueue(ctx, noteArgs{}, &pgqueue.EnqueueOpts{Queue: "polled"})
		must(t, err)
		waitState(t, b.pool, warm.ID, "completed")
		ids := b.fanOut(t, 3, "polled")
		b.complete(t, b.claim(t)...) // by another client: no wake-up in process
		for _, id := range ids[1:] {
			waitState(t, b.pool, id, "completed")
		}
	})

	// A queue with flow limits is claimed by claim_flow.sql, which reads
	// no gate: limits set before the opening make it release the children
	// as an edge does; limits set after it leave them to the scheduler's
	// sweep.
	t.Run("LimitedQueue", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		ids := b.fanOut(t, 2, "limited")
		must(t, b.client.QueueSetLimits(ctx, "limited", pgqueue.QueueLimits{MaxRunning: 5}))
		b.complete(t, b.claim(t)...)
		if got := b.rowStates(t, ids[1:]...); !slices.Equal(got, []string{"available", "available"}) {
			t.Fatalf("rows %v, want the children of a limited queue written available at the opening", got)
		}

		c := setupWorkflow(t)
		ids = c.fanOut(t, 2, "limited")
		c.complete(t, c.claim(t)...)
		must(t, c.client.QueueSetLimits(ctx, "limited", pgqueue.QueueLimits{MaxRunning: 5}))
		if jobs, err := pgqueue.Claim(ctx, c.client, "limited", 10); err != nil || len(jobs) != 0 {
			t.Fatalf("claimed %d jobs, %v: claim.sql serves no limited queue", len(jobs), err)
		}
		startPruner(t, c.pool, &pgqueue.Config{SchedulerInterval: 50 * time.Millisecond}) // the maintenance alone
		waitFor(t, "the sweep to release the children", func() bool {
			return slices.Equal(c.rowStates(t, ids[1:]...), []string{"available", "available"})
		})
		waitFor(t, "the sweep to delete the emptied gate", func() bool {
			exists, _ := c.gate(t, ids[0], "limited")
			return !exists
		})
	})

	// QueueList and JobList count and list an open gate's children as
	// available, a closed gate's as blocked.
	t.Run("Readers", func(t *testing.T) {
		t.Parallel()
		b := setupWorkflow(t)
		open := b.fanOut(t, 3, "gated")
		closed := b.fanOut(t, 2, "gated")
		for _, j := range b.claim(t) {
			if j.ID == open[0] {
				b.complete(t, j)
			}
		}
		queues, err := b.client.QueueList(ctx)
		must(t, err)
		i := slices.IndexFunc(queues, func(q *pgqueue.QueueInfo) bool { return q.Name == "gated" })
		if i < 0 || queues[i].Available != 3 || queues[i].Blocked != 2 || queues[i].OldestAvailableAt.IsZero() {
			t.Fatalf("queue list %+v, want 3 available and 2 blocked", queues[i])
		}
		list := func(state pgqueue.JobState) []int64 {
			res, err := b.client.JobList(ctx, &pgqueue.JobListParams{Queues: []string{"gated"}, States: []pgqueue.JobState{state}})
			must(t, err)
			var ids []int64
			for _, j := range res.Jobs {
				if j.State != state {
					t.Errorf("job %d listed under %s reads %s", j.ID, state, j.State)
				}
				ids = append(ids, j.ID)
			}
			slices.Sort(ids)
			return ids
		}
		if got := list(pgqueue.StateAvailable); !slices.Equal(got, open[1:]) {
			t.Errorf("available: %v, want %v", got, open[1:])
		}
		if got := list(pgqueue.StateBlocked); !slices.Equal(got, closed[1:]) {
			t.Errorf("blocked: %v, want %v", got, closed[1:])
		}
		j, err := b.client.JobGet(ctx, open[1])
		must(t, err)
		if j.State != pgqueue.StateAvailable {
			t.Errorf("JobGet of an open gate's child: %s", j.State)
		}
	})
}

// workflowOf returns the workflow of job id.
func (b *workflowBundle) workflowOf(t *testing.T, id int64) int64 {
	t.Helper()
	var wf int64
	must(t, b.pool.QueryRow(context.Background(), "SELECT workflow_id FROM pgqueue.jobs WHERE id = $1", id).Scan(&wf))
	return wf
}

// TestWorkflowGatesMigrateDown checks that migrating down past gates keeps
// what they held: the children of an open gate become available, the
// child of a closed one waits on a dependency edge, which its parent's
// completion then resolves.
func TestWorkflowGatesMigrateDown(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "migrations down and up with gated jobs")
	ctx := context.Background()
	b := setupWorkflow(t)
	open := b.fanOut(t, 2, "")
	closed := b.fanOut(t, 1, "")
	for _, j := range b.claim(t) {
		if j.ID == open[0] {
			b.complete(t, j)
		}
	}
	mg, err := pgqueue.NewMigrator(ctx, b.pool, pgqueue.SchemaDefault)
	must(t, err)
	defer mg.Close()
	// Down to 17, the version before gates (those after 18 change only
	// functions).
	from, _, err := mg.Version(ctx)
	must(t, err)
	down, err := mg.Down(ctx, int(from)-17)
	must(t, err)
	if down.To != 17 {
		t.Fatalf("down %+v", down)
	}
	if got := b.rowStates(t, append(open[1:], closed[1])...); !slices.Equal(got, []string{"available", "available", "blocked"}) {
		t.Fatalf("after the down migration: %v, want the open gate's children available and the closed one's child blocked", got)
	}
	var edges int
	must(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM pgqueue.job_deps WHERE parent_id = $1 AND child_id = $2 AND NOT resolved",
		closed[0], closed[1]).Scan(&edges))
	if edges != 1 {
		t.Fatalf("%d edges from the closed gate's parent to its child, want 1", edges)
	}
	// Migration 17's functions release it the edge way.
	_, err = b.pool.Exec(ctx, `
		WITH done AS (UPDATE pgqueue.jobs SET state = 'completed', finalized_at = now(), lease_until = NULL
		              WHERE id = $1 RETURNING id)
		SELECT pgqueue.workflow_settle(ARRAY(SELECT id FROM done), ARRAY['completed'])`, closed[0])
	must(t, err)
	if got := b.rowStates(t, closed[1]); got[0] != "available" {
		t.Fatalf("the closed gate's child after its parent completed: %s", got[0])
	}
	up, err := mg.Up(ctx)
	must(t, err)
	if up.From != 17 || up.To != down.From {
		t.Fatalf("up %+v after down %+v", up, down)
	}
}
