//go:build unix

package integration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// The fault test of workflows: eight faultworker processes (-workflow)
// work layered workflows while the test kills, freezes and cuts them off
// from the server at random. In each layer after the first, most jobs
// depend on 3 jobs of the layer above (edges in job_deps); the others fan
// out, each depending on one job of the layer above alone, and so wait
// behind that job's gate (job_gates, migrations/000018_workflow_gates):
// opened by the parent's fenced completion, the gated children claimed
// straight from blocked. Even jobs complete with CompleteTx and record
// their run in that transaction; odd ones return and are completed by the
// client's batched completer, so both fenced release paths meet the
// faults, for edges and gates.
//
// What a child's release depends on is recorded by triggers, in the
// transactions that do it, so that only committed writes are seen and
// each carries its transaction's id: every change of a workflow job's
// state or fence (claims, rescues, completions, releases) in wf_events,
// every edge inserted or resolved in wf_edges, every gate inserted,
// opened or deleted in wf_gates. The server keeps commit timestamps
// (track_commit_timestamp), so the checks know when each of those
// transactions became visible.

const (
	wfQueue       = "wf"
	wfWorkers     = 8
	wfWorkerSlots = 4
	wfLayers      = 20
	wfParents     = 3 // each job of a layer after the first that does not fan out depends on this many of the layer above

	// The fan-outs: in each layer after the first, wfGatedPercent of the
	// jobs depend on one job of the layer above alone (gated children):
	// one job of that layer has wfWideMin to wfWideMax of them, others 1
	// to wfFanOut each.
	wfGatedPercent = 40
	wfWideMin      = 20
	wfWideMax      = 40
	wfFanOut       = 8

	// wfMutantEnv, set to 1, has the test itself break the fenced
	// release: halfway through the faults, it settles (workflow_settle, as
	// a completion does) up to five running parents, up to three with a
	// closed gate and two with edges only, as a stale completion that
	// ignored its fence would: their gates open, their edges resolve. The
	// checks must then fail.
	wfMutantEnv = "PGQUEUE_FAULT_WORKFLOW_MUTANT"
)

// faultWorkflowArgs matches faultworker's WorkflowArgs.
type faultWorkflowArgs struct {
	Layer int `json:"layer"`
}

func (faultWorkflowArgs) Kind() string { return "wf" }

// wfSchema is what the workflow test adds to faultSchema.
const wfSchema = `
-- The runs completed with CompleteTx, written by the worker in the
-- transaction of the completion.
CREATE TABLE wf_runs (
    id         bigserial PRIMARY KEY,
    job_id     bigint NOT NULL,
    fence      bigint NOT NULL,
    worker     text   NOT NULL,
    started_at timestamptz NOT NULL,
    ended_at   timestamptz NOT NULL,
    xid        xid8   NOT NULL
);
CREATE INDEX wf_runs_job_idx ON wf_runs (job_id);

-- Every change of a workflow job's state or fence, in its transaction.
CREATE TABLE wf_events (
    seq             bigserial PRIMARY KEY,
    job_id          bigint NOT NULL,
    old_state       text   NOT NULL,
    new_state       text   NOT NULL,
    old_fence       bigint,
    fence           bigint,
    pending_parents integer,
    worker          text,
    xid             xid8   NOT NULL DEFAULT pg_current_xact_id(),
    at              timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX wf_events_job_idx ON wf_events (job_id, seq);
CREATE INDEX wf_events_xid_idx ON wf_events (xid);

CREATE FUNCTION wf_audit_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO wf_events (job_id, old_state, new_state, old_fence, fence, pending_parents, worker)
    VALUES (NEW.id, OLD.state, NEW.state, OLD.fence, NEW.fence, NEW.pending_parents, NEW.worker_id);
    RETURN NULL;
END
$$;
CREATE TRIGGER wf_job_audit
    AFTER UPDATE ON pgqueue.jobs
    FOR EACH ROW WHEN (NEW.workflow_id IS NOT NULL AND (OLD.state IS DISTINCT FROM NEW.state OR OLD.fence IS DISTINCT FROM NEW.fence))
    EXECUTE FUNCTION wf_audit_job();

-- Every edge as inserted, and every later change of its resolved flag.
CREATE TABLE wf_edges (
    seq       bigserial PRIMARY KEY,
    parent_id bigint  NOT NULL,
    child_id  bigint  NOT NULL,
    op        text    NOT NULL, -- insert, resolve, unresolve
    resolved  boolean NOT NULL,
    xid       xid8    NOT NULL DEFAULT pg_current_xact_id(),
    at        timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX wf_edges_edge_idx ON wf_edges (parent_id, child_id);

CREATE FUNCTION wf_audit_edge() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO wf_edges (parent_id, child_id, op, resolved)
    VALUES (NEW.parent_id, NEW.child_id,
            CASE WHEN TG_OP = 'INSERT' THEN 'insert' WHEN NEW.resolved THEN 'resolve' ELSE 'unresolve' END,
            NEW.resolved);
    RETURN NULL;
END
$$;
CREATE TRIGGER wf_edge_insert AFTER INSERT ON pgqueue.job_deps
    FOR EACH ROW EXECUTE FUNCTION wf_audit_edge();
CREATE TRIGGER wf_edge_update AFTER UPDATE ON pgqueue.job_deps
    FOR EACH ROW WHEN (OLD.resolved IS DISTINCT FROM NEW.resolved) EXECUTE FUNCTION wf_audit_edge();

-- Every gate as inserted, every change of its opened_at, and its delete.
-- opened: opened_at is set (after the insert or update, before the
-- delete).
CREATE TABLE wf_gates (
    seq       bigserial PRIMARY KEY,
    parent_id bigint  NOT NULL,
    queue     text    NOT NULL,
    op        text    NOT NULL, -- insert, open, close, reopen, delete
    opened    boolean NOT NULL,
    xid       xid8    NOT NULL DEFAULT pg_current_xact_id(),
    at        timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX wf_gates_gate_idx ON wf_gates (parent_id, queue);
CREATE INDEX wf_gates_xid_idx ON wf_gates (xid);

CREATE FUNCTION wf_audit_gate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO wf_gates (parent_id, queue, op, opened)
        VALUES (OLD.parent_id, OLD.queue, 'delete', OLD.opened_at IS NOT NULL);
    ELSE
        INSERT INTO wf_gates (parent_id, queue, op, opened)
        VALUES (NEW.parent_id, NEW.queue,
                CASE WHEN TG_OP = 'INSERT' THEN 'insert' WHEN OLD.opened_at IS NULL THEN 'open'
                     WHEN NEW.opened_at IS NULL THEN 'close' ELSE 'reopen' END,
                NEW.opened_at IS NOT NULL);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER wf_gate_insert_delete AFTER INSERT OR DELETE ON pgqueue.job_gates
    FOR EACH ROW EXECUTE FUNCTION wf_audit_gate();
CREATE TRIGGER wf_gate_update AFTER UPDATE OF opened_at ON pgqueue.job_gates
    FOR EACH ROW WHEN (OLD.opened_at IS DISTINCT FROM NEW.opened_at) EXECUTE FUNCTION wf_audit_gate();

-- A job inserted depending on a running job marks that job depended on
-- (has_children) from the inserting session: not a write of its claim,
-- so the audit of foreign writes leaves a change of that column alone
-- out.
DROP TRIGGER jobs_foreign_write ON pgqueue.jobs;
CREATE FUNCTION audit_foreign_write_but_has_children() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (to_jsonb(OLD) - 'has_children') IS DISTINCT FROM (to_jsonb(NEW) - 'has_children') THEN
        INSERT INTO foreign_writes (job_id, fence, holder, writer, old_state, new_state, old_lease, new_lease)
        VALUES (OLD.id, OLD.fence, OLD.worker_id, current_setting('application_name'), OLD.state, NEW.state, OLD.lease_until, NEW.lease_until);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_foreign_write
    AFTER UPDATE ON pgqueue.jobs
    FOR EACH ROW WHEN (OLD.state = 'running' AND NEW.fence IS NOT DISTINCT FROM OLD.fence
                       AND current_setting('application_name') IS DISTINCT FROM '` + faultAppPrefix + `' || OLD.worker_id)
    EXECUTE FUNCTION audit_foreign_write_but_has_children();
`

// faultWorkflowScale is how long faults are injected and how wide a
// workflow's layers are.
func faultWorkflowScale() (duration time.Duration, minWidth, maxWidth int) {
	if os.Getenv("PGQUEUE_FAULT_LONG") == "1" {
		return 4 * time.Minute, 100, 500
	}
	return 50 * time.Second, 100, 250
}

// wfSnapshotCheck finds, in one snapshot, what the fenced release in the
// same transaction as the parent's completion forbids at every moment,
// over job_edges (job_deps' edges and the gates', a gate's edge resolved
// once the gate no longer holds its child): a job whose pending_parents is
// not the count of its unresolved edges (for a gated child: 1 while its
// row is blocked, 0 once claimed), a job shown blocked (job_state: an open
// gate's child reads available) whose parents all completed (stuck), a job
// not shown blocked with a parent not completed (released early), a
// resolved edge or open gate whose parent did not complete, a completed
// parent whose edge is unresolved or gate closed, a gated child blocked
// in its row whose gate is gone (no claim would take it: only a claim
// that took its gate's last children or the sweep of a drained gate
// deletes an open gate). No job of the test fails, so completed is the
// only end of a parent. With $1 false it reads
// only the workflows with jobs not yet final (the final checks see the
// others), so that it costs the same all run long.
const wfSnapshotCheck = `
	WITH open AS (
	    SELECT DISTINCT workflow_id FROM pgqueue.jobs
	    WHERE workflow_id IS NOT NULL AND state NOT IN ('completed', 'discarded', 'cancelled')),
	e AS (
	    SELECT d.child_id,
	           count(*) FILTER (WHERE NOT d.resolved) AS unresolved,
	           count(*) FILTER (WHERE p.state IS DISTINCT FROM 'completed') AS parents_open,
	           count(*) FILTER (WHERE d.resolved AND p.state IS DISTINCT FROM 'completed') AS resolved_open,
	           count(*) FILTER (WHERE NOT d.resolved AND p.state = 'completed') AS completed_unresolved,
	           string_agg(format('%s %s%s', p.id, p.state, CASE WHEN d.resolved THEN ' (resolved)' ELSE '' END), ', ') AS parents
	    FROM pgqueue.job_edges d
	    JOIN pgqueue.jobs c ON c.id = d.child_id AND ($1 OR c.workflow_id IN (SELECT workflow_id FROM open))
	    LEFT JOIN pgqueue.jobs p ON p.id = d.parent_id
	    GROUP BY d.child_id),
	v AS (
	    SELECT j.*, pgqueue.job_state(j.state, j.gate_id, j.queue) AS shown,
	           j.gate_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pgqueue.job_gates g
	                                                 WHERE g.parent_id = j.gate_id AND g.queue = j.queue) AS gate_gone,
	           CASE WHEN j.gate_id IS NULL THEN coalesce(e.unresolved, 0)
	                WHEN j.state = 'blocked' THEN 1 ELSE 0 END AS want_pending,
	           e.unresolved, e.parents_open, e.resolved_open, e.completed_unresolved, e.parents
	    FROM pgqueue.jobs j LEFT JOIN e ON e.child_id = j.id
	    WHERE j.workflow_id IS NOT NULL AND ($1 OR j.workflow_id IN (SELECT workflow_id FROM open)))
	SELECT format('at %s: job %s (%s, shown %s, pending_parents %s, want %s%s): %s unresolved edges; parents %s',
	              clock_timestamp(), j.id, j.state, j.shown, j.pending_parents, j.want_pending,
	              CASE WHEN j.gate_id IS NOT NULL THEN format('; gate of %s %s', j.gate_id,
	                  coalesce((SELECT CASE WHEN g.opened_at IS NULL THEN 'closed' ELSE 'open since ' || g.opened_at END
	                            FROM pgqueue.job_gates g WHERE g.parent_id = j.gate_id AND g.queue = j.queue), 'gone')) ELSE '' END,
	              coalesce(j.unresolved, 0), coalesce(j.parents, '-'))
	FROM v j
	WHERE coalesce(j.pending_parents, 0) <> j.want_pending
	   OR (j.shown = 'blocked' AND coalesce(j.parents_open, 0) = 0)
	   OR (j.state = 'blocked' AND j.gate_gone)
	   OR (j.shown <> 'blocked' AND j.parents_open > 0)
	   OR j.resolved_open > 0 OR j.completed_unresolved > 0
	ORDER BY j.id LIMIT 20`

// TestFaultWorkflow checks the fenced release of workflows while workers
// are killed (SIGKILL), frozen past their lease (SIGSTOP, then SIGCONT)
// and lose their sessions (pg_terminate_backend): every child starts only
// after all its parents completed, runs to completion once, is released
// (or, behind a gate, made claimable) only by the committed, fenced
// completion of its last parent, and nothing stays blocked.
func TestFaultWorkflow(t *testing.T) {
	t.Parallel()
	duration, minWidth, maxWidth := faultWorkflowScale()
	skipInShortMode(t, fmt.Sprintf("runs %d faultworker processes on layered workflows through SIGKILL, SIGSTOP and terminated backends for %s", wfWorkers, duration))
	mutant := os.Getenv(wfMutantEnv) == "1"
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	t.Logf("seed %d, faults for %s, layers of %d-%d jobs, mutant %v", seed, duration, minWidth, maxWidth, mutant)

	e := newFaultEnvSettings(t, 0, map[string]string{"track_commit_timestamp": "on"})
	ctx := t.Context()
	if _, err := e.db.Exec(ctx, wfSchema); err != nil {
		t.Fatal(err)
	}
	client, err := pgqueue.New(e.db, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &wfFeeder{e: e, client: client, rng: rand.New(rand.NewPCG(seed, 0xfeed)), minWidth: minWidth, maxWidth: maxWidth}
	f.addWorkflow()

	opts := faultWorkerOpts{
		maxWorkers: wfWorkerSlots,
		queues:     []string{wfQueue},
		// As in the flow test: a loaded machine can take more than 3 s to
		// answer a new connection.
		extra: []string{"-workflow", "-connect-timeout", "10s"},
	}
	live := e.startWorkers(wfWorkers, opts)
	e.waitUntil("the first layer's children run", 2*time.Minute, func(ctx context.Context) (bool, error) {
		n, err := e.count(ctx, `SELECT count(*) FROM wf_events WHERE new_state = 'running' AND job_id IN (SELECT child_id FROM pgqueue.job_deps)`)
		return n > 0, err
	})

	// Beside the fault loop: the snapshot check every second, and jobs
	// joining the newest workflow, depending on two of its running jobs
	// and one completed, so that inserts race with completions.
	bg, stopBG := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var bgMu sync.Mutex
	var snapshotViolations, bgErrors []string
	var snapshots, joined int64
	wg.Add(2)
	go func() {
		defer wg.Done()
		for sleepCtx(bg, time.Second) {
			rows := e.evidence(bg, wfSnapshotCheck, false)
			if bg.Err() != nil {
				return
			}
			bgMu.Lock()
			if len(rows) == 1 && strings.HasPrefix(rows[0], "query failed") {
				bgErrors = append(bgErrors, rows[0])
			} else {
				snapshots++
				snapshotViolations = append(snapshotViolations, rows...)
			}
			bgMu.Unlock()
		}
	}()
	go func() {
		defer wg.Done()
		for sleepCtx(bg, 700*time.Millisecond) {
			n, err := f.addJoiners(bg)
			bgMu.Lock()
			joined += n
			if err != nil && bg.Err() == nil {
				bgErrors = append(bgErrors, err.Error())
			}
			bgMu.Unlock()
		}
	}()

	// The fault loop, as in TestFaultFlowControl: a fault every 0.5-2 s,
	// the three kinds in a shuffled order each round; a frozen worker
	// resumes 2.5-5 s later (past its 2 s lease); a killed one is replaced
	// at once. A new workflow is added whenever fewer than 3 layers' worth
	// of jobs are left to run, except in the last 10 s.
	fi := newFaultInjector(e, opts, rng, live)
	deadline := time.Now().Add(duration)
	lastFeed := time.Now()
	mutated := false
	for time.Now().Before(deadline) {
		now := time.Now()
		fi.thaw(now)
		if now.Sub(lastFeed) >= 500*time.Millisecond && deadline.Sub(now) > 10*time.Second {
			open := e.mustCount(`SELECT count(*) FROM pgqueue.jobs WHERE state NOT IN ('completed', 'discarded', 'cancelled')`)
			if open < int64(3*maxWidth) {
				f.addWorkflow()
			}
			lastFeed = now
		}
		if mutant && !mutated && deadline.Sub(now) < duration/2 {
			// A stale completion, as a release that ignored the fence
			// would settle it: the parents' gates open and their edges
			// resolve while they run.
			// Its locks are waited for briefly, then tried again: a worker
			// this loop froze may hold one, and only this loop resumes it.
			if err := wfMutate(ctx, e); err == nil {
				mutated = true
			} else {
				t.Logf("mutant: settling failed, trying again: %v", err)
			}
		}
		if !fi.due(now) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		fi.inject()
	}
	fi.thawAll()
	if mutant && !mutated {
		t.Errorf("mutant: never settled a running parent")
	}
	faultsDone := time.Now()
	stopBG()
	wg.Wait()

	// Faults off: every job must end, however long it takes while jobs keep
	// ending. A stall fails the test, and the checks still run: they say
	// what is stuck and why.
	e.jobs = f.total
	e.waitDrained()
	e.elapsed = time.Since(e.start)
	drain := time.Since(faultsDone)
	e.stopWorkers()

	if len(bgErrors) > 0 {
		t.Errorf("%d errors beside the faults, e.g.\n  %s", len(bgErrors), strings.Join(bgErrors[:min(len(bgErrors), 10)], "\n  "))
	}
	// The same check once more, with every job final.
	snapshotViolations = append(snapshotViolations, e.evidence(ctx, wfSnapshotCheck, true)...)
	snapshots++
	wf := e.checkWorkflow(ctx, snapshotViolations, snapshots, f.gated)
	figures := e.checkWith(wfInvariants())
	refusedResults := 0
	e.mu.Lock()
	for _, w := range e.workers {
		refusedResults += w.countLines("event result-refused")
	}
	e.mu.Unlock()
	figures.staleRefused += int64(refusedResults)
	faults := fi.faults()
	e.report("Workflow", faults,
		fi.summary(duration, wfWorkers),
		figures, fmt.Sprintf("| %s joined=%d snapshots=%d results_refused=%d drain=%s seed=%d", wf, joined, snapshots, refusedResults, drain.Round(100*time.Millisecond), seed))
}

// wfMutate settles up to five running parents that no completion holds
// (SKIP LOCKED) as if they had completed, up to three with a closed gate
// and two with no gate, with a lock timeout; it fails, and commits
// nothing, when no gate opened.
func wfMutate(ctx context.Context, e *faultEnv) error {
	tx, err := e.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '500ms'`); err != nil {
		return err
	}
	var parents, changed int64
	if err := tx.QueryRow(ctx, `
		WITH gated AS (
		    SELECT p.id FROM pgqueue.jobs p
		    WHERE p.state = 'running' AND p.has_children
		      AND EXISTS (SELECT 1 FROM pgqueue.job_gates g WHERE g.parent_id = p.id AND g.opened_at IS NULL)
		    LIMIT 3 FOR UPDATE SKIP LOCKED
		), edged AS (
		    SELECT p.id FROM pgqueue.jobs p
		    WHERE p.state = 'running' AND p.has_children
		      AND NOT EXISTS (SELECT 1 FROM pgqueue.job_gates g WHERE g.parent_id = p.id)
		    LIMIT 2 FOR UPDATE SKIP LOCKED
		)
		SELECT count(*), coalesce(sum(pgqueue.workflow_settle(ARRAY[id], ARRAY['completed'])), 0)
		FROM (SELECT id FROM gated UNION ALL SELECT id FROM edged) p`).Scan(&parents, &changed); err != nil {
		return err
	}
	var resolved, opened int64
	if err := tx.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM wf_edges WHERE xid = pg_current_xact_id()),
		       (SELECT count(*) FROM wf_gates WHERE xid = pg_current_xact_id() AND op = 'open')`).Scan(&resolved, &opened); err != nil {
		return err
	}
	if opened == 0 {
		// No running parent with a closed gate was free (none ran, or
		// each was locked by its completion): try again, so that a gate
		// surely opens out of turn.
		return fmt.Errorf("no gate opened (%d edges resolved)", resolved)
	}
	e.t.Logf("mutant: settled %d running parents: %d gates opened, %d edges resolved, %d children released or gates opened",
		parents, opened, resolved, changed)
	return tx.Commit(ctx)
}

// waitDrained waits until every job is final, as waitFinalExcept does,
// but a stall (no job final for faultStall) is a test error, not the
// end of the test.
func (e *faultEnv) waitDrained() {
	e.t.Helper()
	last, progressed := int64(-1), time.Now()
	for {
		n, err := e.finished(e.t.Context())
		switch {
		case err != nil:
		case n >= int64(e.jobs):
			return
		case n > last:
			last, progressed = n, time.Now()
		}
		if time.Since(progressed) > faultStall {
			e.t.Errorf("no job became final for %s (%d of %d final; last error: %v)\n%s", faultStall, max(last, 0), e.jobs, err, e.stateDump())
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sleepCtx waits d and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// countLines counts the lines the process printed that start with prefix.
func (p *workerProc) countLines(prefix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.stdout {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// wfFeeder inserts the workflows and the jobs that join them.
type wfFeeder struct {
	e                  *faultEnv
	client             *pgqueue.Client
	minWidth, maxWidth int

	mu        sync.Mutex // the fields below; addJoiners runs beside the fault loop
	rng       *rand.Rand
	total     int
	gated     int // jobs inserted with one parent of their batch alone: behind a gate
	workflows int
	latest    int64 // the newest workflow
}

// addWorkflow inserts one layered workflow in one EnqueueMany: wfLayers
// layers of minWidth to maxWidth jobs (one width for the workflow). In
// each layer after the first, the first jobs depend on wfParents distinct
// jobs of the layer above, chosen at random (edges); the last
// wfGatedPercent fan out: each depends on one job of the layer above
// alone, and so waits behind its gate. The fan-outs' parents are distinct
// jobs of the layer above, chosen at random: the first has wfWideMin to
// wfWideMax children, the others 1 to wfFanOut. Parents of both kinds
// are themselves parents of both kinds, and half of them (the odd ids)
// complete through the batched completer.
func (f *wfFeeder) addWorkflow() {
	t := f.e.t
	t.Helper()
	f.mu.Lock()
	width := f.minWidth + f.rng.IntN(f.maxWidth-f.minWidth+1)
	params := make([]pgqueue.EnqueueManyParams, 0, wfLayers*width)
	gatedJobs := 0
	for layer := range wfLayers {
		above := (layer - 1) * width
		var fanParents []int // the parent (in the layer above) of each gated job of this layer
		if layer > 0 {
			gated := width * wfGatedPercent / 100
			perm := f.rng.Perm(width)
			size := min(gated, wfWideMin+f.rng.IntN(wfWideMax-wfWideMin+1))
			for p := 0; len(fanParents) < gated; p++ {
				for range size {
					fanParents = append(fanParents, perm[p])
				}
				size = min(gated-len(fanParents), 1+f.rng.IntN(wfFanOut))
			}
		}
		edged := width - len(fanParents)
		for i := range width {
			opts := &pgqueue.EnqueueOpts{Queue: wfQueue, MaxAttempts: 1000} // faults must never use a job up
			switch {
			case layer == 0:
			case i < edged:
				for _, k := range f.rng.Perm(width)[:wfParents] {
					opts.DependsOn = append(opts.DependsOn, pgqueue.DependsOnIndex(above+k))
				}
			default:
				opts.DependsOn = []pgqueue.Dependency{pgqueue.DependsOnIndex(above + fanParents[i-edged])}
				gatedJobs++
			}
			params = append(params, pgqueue.EnqueueManyParams{Args: faultWorkflowArgs{Layer: layer}, Opts: opts})
		}
	}
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := f.client.EnqueueMany(ctx, params)
	if err != nil || res.Enqueued != int64(len(params)) {
		t.Fatalf("enqueue a workflow of %d jobs: %+v, %v", len(params), res, err)
	}
	f.mu.Lock()
	f.total += len(params)
	f.gated += gatedJobs
	f.workflows++
	f.latest = res.Workflow
	f.mu.Unlock()
}

// addJoiners inserts 4 jobs into the newest workflow, each depending on
// the same two running jobs of it and one completed (DependsOnJob): the
// insert marks the parents depended on, racing with their completions,
// and must count the completed one as done.
func (f *wfFeeder) addJoiners(ctx context.Context) (int64, error) {
	f.mu.Lock()
	wfID := f.latest
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	rows, err := f.e.db.Query(ctx, `
		(SELECT id FROM pgqueue.jobs WHERE workflow_id = $1 AND state = 'running' ORDER BY random() LIMIT 2)
		UNION ALL
		(SELECT id FROM pgqueue.jobs WHERE workflow_id = $1 AND state = 'completed' ORDER BY random() LIMIT 1)`, wfID)
	if err != nil {
		return 0, fmt.Errorf("pick parents: %w", err)
	}
	var parents []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return 0, err
		}
		parents = append(parents, id)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("pick parents: %w", err)
	}
	if len(parents) == 0 {
		return 0, nil
	}
	var deps []pgqueue.Dependency
	for _, id := range parents {
		deps = append(deps, pgqueue.DependsOnJob(id))
	}
	params := make([]pgqueue.EnqueueManyParams, 4)
	for i := range params {
		params[i] = pgqueue.EnqueueManyParams{Args: faultWorkflowArgs{Layer: -1},
			Opts: &pgqueue.EnqueueOpts{Queue: wfQueue, MaxAttempts: 1000, DependsOn: deps}}
	}
	// Not cancelled with the loop: a cancellation that reached the client
	// after the server committed made the insert look failed, and its
	// jobs went uncounted (the check then found 4 jobs more than
	// enqueued). The loop waits for it instead.
	insertCtx, cancelInsert := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancelInsert()
	res, err := f.client.EnqueueMany(insertCtx, params)
	if err != nil {
		return 0, fmt.Errorf("enqueue %d jobs after %v: %w", len(params), parents, err)
	}
	if res.Workflow != wfID {
		return 0, fmt.Errorf("jobs after %v of workflow %d joined workflow %d", parents, wfID, res.Workflow)
	}
	f.mu.Lock()
	f.total += len(params)
	f.mu.Unlock()
	return res.Enqueued, nil
}

// wfInvariants are the fault suite's invariants for this test: only the
// even jobs (those completed with CompleteTx) write an effect.
func wfInvariants() []faultInvariant {
	var out []faultInvariant
	for _, inv := range faultInvariants {
		if inv.name == "each completed job has exactly one effect, with the job's final fence" {
			inv.name = "each completed even job has exactly one effect, with the job's final fence; odd jobs none"
			inv.query = `
				SELECT format('job %s (fence %s): %s effects, fences %s', j.id, j.fence, count(e.id), coalesce(string_agg(e.fence::text || ' by ' || e.worker, ', '), '-'))
				FROM pgqueue.jobs j LEFT JOIN effects e ON e.job_id = j.id
				WHERE j.state = 'completed'
				GROUP BY j.id, j.fence
				HAVING count(e.id) <> 1 - j.id % 2 OR bool_or(e.id IS NOT NULL AND e.fence IS DISTINCT FROM j.fence)
				ORDER BY j.id`
		}
		out = append(out, inv)
	}
	return out
}

// wfChecks are the workflow guarantees, checked in SQL once every job is
// final. Each query's rows are violations.
//
// "Started after all its parents completed" is checked on every claim of
// a child, not only the one that completed: the claim's wf_events row is
// written in the claim's transaction, by clock_timestamp(), after its
// snapshot was taken; a parent's completion is the transaction of its
// running -> completed event, and pg_xact_commit_timestamp is when it
// committed, taken before it became visible. A claim that saw its child
// released saw the release's commit, and the release saw every parent's
// completion (the last one's in its own transaction, the others' counted
// down before it under the child's row lock), so each parent's commit
// timestamp is below the claim's time. A claim that took a gated child
// from blocked saw its gate open, and the gate opens in the transaction
// of the parent's completion, so the same holds. A child claimed before
// some parent's completion committed fails it, unless that commit fell in
// the microseconds between the claim's snapshot and its trigger. The even
// jobs' own start (wf_runs.started_at, read by the handler after its claim
// committed) is checked the same way. attempted_at would not do: it is
// the claim transaction's start, and a completion could commit between
// that and the claim's snapshot, nor would finalized_at, the completing
// transaction's start, long before its commit for CompleteTx.
//
// The parents are read from job_edges: job_deps' edges, and each gated
// child's gate (jobs.gate_id) as an edge.
var wfChecks = []faultInvariant{
	{"every workflow job completed exactly once, under its final fence", `
		SELECT format('job %s (%s, fence %s): %s completions, fences %s', j.id, j.state, j.fence, count(ev.seq),
		              coalesce(string_agg(ev.fence::text || ' by ' || ev.worker, ', '), '-'))
		FROM pgqueue.jobs j LEFT JOIN wf_events ev ON ev.job_id = j.id AND ev.new_state = 'completed'
		WHERE j.workflow_id IS NOT NULL
		GROUP BY j.id
		HAVING j.state <> 'completed' OR count(ev.seq) <> 1 OR bool_or(ev.old_state <> 'running' OR ev.fence IS DISTINCT FROM j.fence)
		ORDER BY j.id`},
	{"each run of CompleteTx was recorded in the transaction of its job's one completion", `
		SELECT format('job %s: run fence %s by %s (xid %s); completion %s', r.job_id, r.fence, r.worker, r.xid,
		              coalesce((SELECT string_agg(format('fence %s xid %s', ev.fence, ev.xid), ', ') FROM wf_events ev
		                        WHERE ev.job_id = r.job_id AND ev.new_state = 'completed'), '-'))
		FROM wf_runs r
		WHERE NOT EXISTS (SELECT 1 FROM wf_events ev WHERE ev.job_id = r.job_id AND ev.new_state = 'completed'
		                  AND ev.fence = r.fence AND ev.xid = r.xid)
		   OR r.job_id % 2 = 1
		   OR (SELECT count(*) FROM wf_runs r2 WHERE r2.job_id = r.job_id) > 1
		ORDER BY r.id`},
	{"every claim gave a new fence to an available job or to a gated child still blocked, never to a running one (no job started twice at once)", `
		SELECT format('job %s (gate %s): claimed from %s with fence %s (was %s) by %s at %s', ev.job_id, coalesce(j.gate_id::text, 'none'),
		              ev.old_state, ev.fence, ev.old_fence, ev.worker, ev.at)
		FROM wf_events ev JOIN pgqueue.jobs j ON j.id = ev.job_id
		WHERE ev.new_state = 'running'
		  AND (ev.fence IS NOT DISTINCT FROM ev.old_fence
		       OR NOT (ev.old_state = 'available' OR (ev.old_state = 'blocked' AND j.gate_id IS NOT NULL)))
		ORDER BY ev.seq`},
	// A claim from blocked may take only a gated child, and only once its
	// gate is open; the gate opens only in the transaction of its parent's
	// fenced completion. A stale completion that opened the gate, or a
	// claim that read a closed gate as open, shows here.
	{"every claim from blocked took a gated child (pending_parents 0) through the gate opened by the transaction of its parent's one completion, committed before the claim", `
		SELECT format('job %s (gate of %s in %s): claimed from blocked with fence %s, pending_parents %s, by %s at %s; parent completed %s; gate %s',
		              ev.job_id, j.gate_id, j.queue, ev.fence, ev.pending_parents, ev.worker, ev.at,
		              coalesce((SELECT string_agg(format('from %s (fence %s) in xid %s, committed %s', p.old_state, p.fence, p.xid,
		                                                 pg_xact_commit_timestamp(p.xmin)), '; ')
		                        FROM wf_events p WHERE p.job_id = j.gate_id AND p.new_state = 'completed'), 'never'),
		              coalesce((SELECT string_agg(format('%s xid %s at %s, committed %s', g.op, g.xid, g.at, pg_xact_commit_timestamp(g.xmin)), '; ' ORDER BY g.seq)
		                        FROM wf_gates g WHERE g.parent_id = j.gate_id AND g.queue = j.queue), 'no record'))
		FROM wf_events ev JOIN pgqueue.jobs j ON j.id = ev.job_id
		WHERE ev.old_state = 'blocked' AND ev.new_state = 'running'
		  AND (j.gate_id IS NULL OR ev.pending_parents IS DISTINCT FROM 0
		       OR (SELECT count(*) FROM wf_events p WHERE p.job_id = j.gate_id AND p.new_state = 'completed') <> 1
		       OR NOT EXISTS (SELECT 1 FROM wf_events p
		                      JOIN wf_gates g ON g.parent_id = p.job_id AND g.queue = j.queue AND g.op = 'open' AND g.xid = p.xid
		                      WHERE p.job_id = j.gate_id AND p.old_state = 'running' AND p.new_state = 'completed'
		                        AND pg_xact_commit_timestamp(p.xmin) < ev.at))
		ORDER BY ev.seq`},
	// The queue has no flow limits: nothing but a claim takes a gated
	// child out of blocked (a rescued one comes back scheduled, then
	// available, and is claimed from there).
	{"every gated child left blocked once, by its first claim, never released otherwise", `
		SELECT format('job %s (gate of %s): %s', j.id, j.gate_id,
		              coalesce((SELECT string_agg(format('%s -> %s (pending %s, fence %s) xid %s at %s', ev.old_state, ev.new_state,
		                                                 ev.pending_parents, ev.fence, ev.xid, ev.at), '; ' ORDER BY ev.seq)
		                        FROM wf_events ev WHERE ev.job_id = j.id), 'no event'))
		FROM pgqueue.jobs j
		WHERE j.gate_id IS NOT NULL
		  AND ((SELECT count(*) FROM wf_events ev WHERE ev.job_id = j.id AND ev.old_state = 'blocked') <> 1
		       OR (SELECT ev.old_state || ' -> ' || ev.new_state FROM wf_events ev WHERE ev.job_id = j.id ORDER BY ev.seq LIMIT 1)
		          IS DISTINCT FROM 'blocked -> running')
		ORDER BY j.id`},
	{"no job ever went back to blocked", `
		SELECT format('job %s: %s -> blocked at %s', job_id, old_state, at)
		FROM wf_events WHERE new_state = 'blocked' ORDER BY seq`},
	{"every claim of a child came after every parent's completion committed", `
		SELECT format('job %s claimed from %s (fence %s) at %s; parent %s completed (fence %s) committed at %s', c.job_id, c.old_state, c.fence, c.at,
		              d.parent_id, p.fence, pg_xact_commit_timestamp(p.xmin))
		FROM wf_events c
		JOIN pgqueue.job_edges d ON d.child_id = c.job_id
		LEFT JOIN wf_events p ON p.job_id = d.parent_id AND p.new_state = 'completed'
		WHERE c.new_state = 'running' AND c.old_state <> 'running'
		  AND (p.seq IS NULL OR pg_xact_commit_timestamp(p.xmin) IS NULL OR pg_xact_commit_timestamp(p.xmin) >= c.at)
		ORDER BY c.seq`},
	{"every CompleteTx run of a child started after every parent's completion committed", `
		SELECT format('job %s run (fence %s) started %s; parent %s completion committed at %s', r.job_id, r.fence, r.started_at,
		              d.parent_id, pg_xact_commit_timestamp(p.xmin))
		FROM wf_runs r
		JOIN pgqueue.job_edges d ON d.child_id = r.job_id
		LEFT JOIN wf_events p ON p.job_id = d.parent_id AND p.new_state = 'completed'
		WHERE p.seq IS NULL OR pg_xact_commit_timestamp(p.xmin) >= r.started_at
		ORDER BY r.id`},
	// The fenced opening: a gate is written closed with its children,
	// opened only by the transaction that completed its parent, running ->
	// completed under the fence it held, once (a later completion of the
	// same parent opens nothing), and deleted only open (by the claim that
	// took its last children, or the maintenance sweep). Every parent
	// completes in this test, so every gate opens.
	{"every gate was inserted closed and opened once, by the transaction of its parent's fenced completion; never closed again, deleted only open", `
		WITH g AS (
		    SELECT parent_id, queue,
		           count(*) FILTER (WHERE op = 'insert') AS inserts,
		           count(*) FILTER (WHERE op = 'insert' AND opened) AS inserted_open,
		           count(*) FILTER (WHERE op = 'open') AS opens,
		           count(*) FILTER (WHERE op IN ('close', 'reopen')) AS changes,
		           count(*) FILTER (WHERE op = 'delete') AS deletes,
		           count(*) FILTER (WHERE op = 'delete' AND NOT opened) AS deleted_closed,
		           min(seq) FILTER (WHERE op = 'insert') AS insert_seq,
		           min(seq) FILTER (WHERE op = 'open') AS open_seq,
		           max(seq) FILTER (WHERE op = 'delete') AS delete_seq,
		           string_agg(format('%s%s xid %s at %s, committed %s', op, CASE WHEN opened THEN ' (open)' ELSE '' END, xid, at,
		                             pg_xact_commit_timestamp(xmin)), '; ' ORDER BY seq) AS history
		    FROM wf_gates GROUP BY parent_id, queue)
		SELECT format('gate of %s in %s: %s; parent %s', g.parent_id, g.queue, g.history,
		              coalesce((SELECT string_agg(format('%s -> completed (fence %s) in xid %s, committed %s', p.old_state, p.fence, p.xid,
		                                                 pg_xact_commit_timestamp(p.xmin)), '; ')
		                        FROM wf_events p WHERE p.job_id = g.parent_id AND p.new_state = 'completed'), 'never completed'))
		FROM g
		WHERE g.inserts <> 1 OR g.inserted_open > 0 OR g.opens <> 1 OR g.changes > 0 OR g.deletes > 1 OR g.deleted_closed > 0
		   OR g.open_seq < g.insert_seq OR g.delete_seq < g.open_seq
		   OR NOT EXISTS (SELECT 1 FROM wf_gates o
		                  JOIN wf_events p ON p.job_id = o.parent_id AND p.old_state = 'running' AND p.new_state = 'completed' AND p.xid = o.xid
		                  WHERE o.parent_id = g.parent_id AND o.queue = g.queue AND o.op = 'open')
		ORDER BY g.parent_id, g.queue`},
	{"every gated child waits behind a gate inserted closed, of an earlier job of its workflow, and has no edge in job_deps", `
		SELECT format('job %s (workflow %s, queue %s): gate of %s (workflow %s); gate inserted closed %s times; %s edges in job_deps',
		              j.id, j.workflow_id, j.queue, j.gate_id, p.workflow_id,
		              (SELECT count(*) FROM wf_gates g WHERE g.parent_id = j.gate_id AND g.queue = j.queue AND g.op = 'insert' AND NOT g.opened),
		              (SELECT count(*) FROM pgqueue.job_deps d WHERE d.child_id = j.id))
		FROM pgqueue.jobs j LEFT JOIN pgqueue.jobs p ON p.id = j.gate_id
		WHERE j.gate_id IS NOT NULL
		  AND (p.workflow_id IS DISTINCT FROM j.workflow_id OR p.id >= j.id
		       OR NOT EXISTS (SELECT 1 FROM wf_gates g WHERE g.parent_id = j.gate_id AND g.queue = j.queue AND g.op = 'insert' AND NOT g.opened)
		       OR EXISTS (SELECT 1 FROM pgqueue.job_deps d WHERE d.child_id = j.id))
		ORDER BY j.id`},
	// The fenced release: an edge is resolved only by the transaction that
	// completed its parent, running -> completed under the fence it held
	// (completions carry no other fence: see the first check). A release
	// path that ignored the fence would resolve edges in a transaction
	// whose completion was refused, where the parent has no such event.
	{"every edge resolved once: at insert after its parent's completion committed, or by the transaction of its parent's completion", `
		SELECT format('edge %s -> %s: %s', d.parent_id, d.child_id,
		              coalesce((SELECT string_agg(format('%s resolved=%s xid %s at %s', x.op, x.resolved, x.xid, x.at), '; ' ORDER BY x.seq)
		                        FROM wf_edges x WHERE x.parent_id = d.parent_id AND x.child_id = d.child_id), 'no record')
		              || coalesce(format('; parent completed (fence %s) in xid %s, committed %s', p.fence, p.xid, pg_xact_commit_timestamp(p.xmin)), '; parent never completed'))
		FROM pgqueue.job_deps d
		LEFT JOIN wf_events p ON p.job_id = d.parent_id AND p.new_state = 'completed'
		WHERE NOT d.resolved
		   OR (SELECT count(*) FROM wf_edges x WHERE x.parent_id = d.parent_id AND x.child_id = d.child_id AND x.resolved) <> 1
		   OR EXISTS (SELECT 1 FROM wf_edges x WHERE x.parent_id = d.parent_id AND x.child_id = d.child_id AND x.op = 'unresolve')
		   OR NOT EXISTS (SELECT 1 FROM wf_edges x WHERE x.parent_id = d.parent_id AND x.child_id = d.child_id AND x.resolved
		                  AND p.seq IS NOT NULL
		                  AND ((x.op = 'resolve' AND x.xid = p.xid)
		                       OR (x.op = 'insert' AND pg_xact_commit_timestamp(p.xmin) < x.at)))
		ORDER BY d.parent_id, d.child_id`},
	{"every child inserted blocked behind edges was released once, with no parent left, by the transaction of a parent's completion", `
		WITH blocked AS (
		    SELECT DISTINCT child_id FROM wf_edges WHERE op = 'insert' AND NOT resolved)
		SELECT format('job %s: %s', b.child_id,
		              coalesce((SELECT string_agg(format('%s -> %s (pending %s) xid %s at %s', ev.old_state, ev.new_state, ev.pending_parents, ev.xid, ev.at), '; ' ORDER BY ev.seq)
		                        FROM wf_events ev WHERE ev.job_id = b.child_id AND ev.old_state = 'blocked'), 'never released'))
		FROM blocked b
		WHERE (SELECT count(*) FROM wf_events ev WHERE ev.job_id = b.child_id AND ev.old_state = 'blocked') <> 1
		   OR NOT EXISTS (SELECT 1 FROM wf_events ev
		                  JOIN pgqueue.job_deps d ON d.child_id = ev.job_id
		                  JOIN wf_events p ON p.job_id = d.parent_id AND p.new_state = 'completed' AND p.xid = ev.xid
		                  WHERE ev.job_id = b.child_id AND ev.old_state = 'blocked' AND ev.new_state = 'available'
		                    AND ev.pending_parents = 0)
		ORDER BY b.child_id`},
	{"no job inserted runnable was ever blocked (gated children apart)", `
		SELECT format('job %s: %s -> %s, but inserted with every edge resolved and no gate', ev.job_id, ev.old_state, ev.new_state)
		FROM wf_events ev
		WHERE ev.old_state = 'blocked'
		  AND NOT EXISTS (SELECT 1 FROM wf_edges x WHERE x.child_id = ev.job_id AND x.op = 'insert' AND NOT x.resolved)
		  AND NOT EXISTS (SELECT 1 FROM pgqueue.jobs j WHERE j.id = ev.job_id AND j.gate_id IS NOT NULL)
		ORDER BY ev.seq`},
}

// checkWorkflow runs wfChecks, failing the test with every violation
// (those of the snapshots taken during the run among them), and
// describes the workflows. gated is how many jobs the test inserted with
// one parent of their batch alone: each must wait behind a gate.
func (e *faultEnv) checkWorkflow(ctx context.Context, snapshotViolations []string, snapshots int64, gated int) string {
	e.t.Helper()
	var violations []string
	if len(snapshotViolations) > 0 {
		violations = append(violations, fmt.Sprintf("in every snapshot, pending_parents counts the unresolved edges (a gated child: 1 while blocked, 0 once claimed), no job shown blocked has its parents all completed, no other job has a parent not completed, and an edge or gate is resolved or open exactly when its parent completed: %d violations in %d snapshots, e.g.\n    %s",
			len(snapshotViolations), snapshots, strings.Join(snapshotViolations[:min(len(snapshotViolations), 10)], "\n    ")))
	}
	for _, c := range wfChecks {
		rows := e.evidence(ctx, c.query)
		if len(rows) > 0 {
			violations = append(violations, fmt.Sprintf("%s: %d violations, e.g.\n    %s", c.name, len(rows), strings.Join(rows[:min(len(rows), 10)], "\n    ")))
		}
	}
	var workflows, edges, resolvedAtInsert, releases, claims, children, maxLayer, runs int64
	var gatedJobs, gates, gateClaims, openedEven, openedOdd, deletedByClaims, deletedBySweep int64
	var releaseToClaim, openToClaim string
	if err := e.db.QueryRow(ctx, `
		SELECT (SELECT count(DISTINCT workflow_id) FROM pgqueue.jobs),
		       (SELECT count(*) FROM pgqueue.job_deps),
		       (SELECT count(*) FROM wf_edges WHERE op = 'insert' AND resolved),
		       (SELECT count(*) FROM wf_events WHERE old_state = 'blocked' AND new_state <> 'running'),
		       (SELECT count(*) FROM wf_events WHERE new_state = 'running'),
		       (SELECT count(DISTINCT child_id) FROM pgqueue.job_deps),
		       (SELECT coalesce(max((args->>'layer')::int), 0) FROM pgqueue.jobs),
		       (SELECT count(*) FROM wf_runs),
		       (SELECT coalesce(format('%sms', round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 1)), '-')
		        FROM (SELECT extract(epoch FROM min(c.at) - min(r.at)) * 1000 AS ms
		              FROM wf_events r JOIN wf_events c ON c.job_id = r.job_id AND c.new_state = 'running'
		              WHERE r.old_state = 'blocked' AND r.new_state <> 'running' GROUP BY r.job_id) x),
		       (SELECT count(*) FROM pgqueue.jobs WHERE gate_id IS NOT NULL),
		       (SELECT count(*) FROM wf_gates WHERE op = 'insert'),
		       (SELECT count(*) FROM wf_events WHERE old_state = 'blocked' AND new_state = 'running'),
		       (SELECT count(*) FROM wf_gates WHERE op = 'open' AND parent_id % 2 = 0),
		       (SELECT count(*) FROM wf_gates WHERE op = 'open' AND parent_id % 2 = 1),
		       (SELECT count(*) FROM wf_gates g WHERE op = 'delete'
		          AND EXISTS (SELECT 1 FROM wf_events ev WHERE ev.xid = g.xid AND ev.new_state = 'running')),
		       (SELECT count(*) FROM wf_gates g WHERE op = 'delete'
		          AND NOT EXISTS (SELECT 1 FROM wf_events ev WHERE ev.xid = g.xid AND ev.new_state = 'running')),
		       (SELECT coalesce(format('%sms', round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 1)), '-')
		        FROM (SELECT extract(epoch FROM min(c.at) - min(pg_xact_commit_timestamp(o.xmin))) * 1000 AS ms
		              FROM pgqueue.jobs j
		              JOIN wf_gates o ON o.parent_id = j.gate_id AND o.queue = j.queue AND o.op = 'open'
		              JOIN wf_events c ON c.job_id = j.id AND c.new_state = 'running'
		              WHERE j.gate_id IS NOT NULL GROUP BY j.id) x)`).
		Scan(&workflows, &edges, &resolvedAtInsert, &releases, &claims, &children, &maxLayer, &runs, &releaseToClaim,
			&gatedJobs, &gates, &gateClaims, &openedEven, &openedOdd, &deletedByClaims, &deletedBySweep, &openToClaim); err != nil {
		e.t.Fatal(err)
	}
	if gatedJobs != int64(gated) {
		violations = append(violations, fmt.Sprintf("%d jobs were inserted with one parent of their batch alone, %d wait behind a gate (jobs.gate_id)", gated, gatedJobs))
	}
	summary := fmt.Sprintf("workflows=%d layers=%d children=%d edges=%d (resolved at insert %d) releases=%d gated=%d gates=%d (opened by CompleteTx %d, by the batched completer %d; deleted by claims %d, by the sweep %d, left %d) gate_claims=%d wf_claims=%d completetx_runs=%d release_to_claim_median=%s gate_open_to_claim_median=%s",
		workflows, maxLayer+1, children, edges, resolvedAtInsert, releases, gatedJobs, gates, openedEven, openedOdd,
		deletedByClaims, deletedBySweep, gates-deletedByClaims-deletedBySweep, gateClaims, claims, runs, releaseToClaim, openToClaim)
	if len(violations) > 0 {
		e.t.Fatalf("workflow guarantees violated (%s):\n  %s", summary, strings.Join(violations, "\n  "))
	}
	return summary
}
