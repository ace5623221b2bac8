//go:build unix

package integration_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue"
)

// Fault scenarios: each runs a few thousand jobs on a private server
// through four faultworker processes (skipped with -short), injects one kind of
// fault, and once every job is final checks in SQL that no job was lost, no
// effect happened twice and no stale write got through (see faultInvariants).
// Each prints one FAULT line of faultFigures.
//
//	go test -race -count=1 ./integration/ -run Fault -v
//
// FAULT_LOG_DIR=<dir> keeps the workers' logs there, one directory per test.

// TestFaultWorkerKilled kills a worker process mid-job: its jobs come back
// when their lease expires and complete elsewhere.
func TestFaultWorkerKilled(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, faultJobs())
	workers := e.startWorkers(4, faultWorkerOpts{})
	victim := workers[0]

	// Caught mid-job first, so that it surely dies holding jobs.
	e.freeze(victim)
	if err := victim.signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
	e.waitSessionsGone(victim.name)
	orphans := e.runningJobs(victim.name)
	if len(orphans) == 0 {
		t.Fatalf("%s held no running job when killed", victim.name)
	}

	e.waitAllFinal()
	e.stopWorkers()
	f := e.check()

	// Every job the victim held was redone by another worker under a newer
	// fence.
	ids, fences := faultSplitJobs(orphans)
	for _, line := range e.evidence(t.Context(), `
		SELECT format('job %s held by %s at fence %s: state %s, attempt %s, effects %s', j.id, $3::text, s.fence, j.state, j.attempt,
		              coalesce((SELECT string_agg(e.fence || ' by ' || e.worker, ', ') FROM effects e WHERE e.job_id = j.id), '-'))
		FROM unnest($1::bigint[], $2::bigint[]) AS s(id, fence) JOIN pgqueue.jobs j ON j.id = s.id
		WHERE NOT (j.state = 'completed' AND j.attempt > 1 AND j.fence > s.fence
		           AND EXISTS (SELECT 1 FROM effects e WHERE e.job_id = j.id AND e.worker <> $3 AND e.fence = j.fence))`,
		ids, fences, victim.name) {
		t.Errorf("orphan not redone elsewhere: %s", line)
	}
	if f.retried == 0 {
		t.Error("no job took more than one attempt")
	}
	e.report("WorkerKilled", 1, "SIGKILL of 1 of 4 workers", f, fmt.Sprintf("orphans_redone=%d", len(orphans)))
}

// TestFaultWorkerPaused stops a worker with SIGSTOP for longer than its
// lease, lets the others take its jobs over, then resumes it: whatever it
// then tries to write about those jobs is refused.
func TestFaultWorkerPaused(t *testing.T) {
	t.Parallel()
	const pause = 5 * time.Second
	e := newFaultEnv(t, faultJobs())
	workers := e.startWorkers(4, faultWorkerOpts{})
	victim := workers[0]

	held, stopped := e.freeze(victim)
	time.Sleep(time.Until(stopped.Add(pause)))
	ids, fences := faultSplitJobs(held)
	takenOver := e.mustCount(`SELECT count(*) FROM unnest($1::bigint[], $2::bigint[]) AS s(id, fence) JOIN pgqueue.jobs j ON j.id = s.id WHERE j.fence > s.fence`, ids, fences)
	doneElsewhere := e.mustCount(`SELECT count(*) FROM unnest($1::bigint[], $2::bigint[]) AS s(id, fence) JOIN effects e ON e.job_id = s.id AND e.fence > s.fence`, ids, fences)
	waits := e.lockWaits()
	if err := victim.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	e.waitAllFinal()
	e.stopWorkers()
	f := e.check()

	refusedVictim := e.mustCount(`SELECT count(*) FROM refusals WHERE worker = $1 AND reason IN ($2, $3)`, victim.name, faultReasonStaleFence, faultReasonLeaseLost)
	refusedHeld := e.mustCount(`SELECT count(*) FROM refusals r JOIN unnest($1::bigint[], $2::bigint[]) AS s(id, fence) ON r.job_id = s.id AND r.fence = s.fence WHERE r.worker = $3`, ids, fences, victim.name)
	// Each job the victim held ended one of two ways: it was redone under a
	// newer fence (by another worker, or by the victim after it resumed),
	// or nobody took it over and the victim's own write, fence unchanged,
	// stood.
	for _, line := range e.evidence(t.Context(), `
		SELECT format('job %s held by %s at fence %s: state %s, fence %s, effects %s', j.id, $3::text, s.fence, j.state, j.fence,
		              coalesce((SELECT string_agg(e.fence || ' by ' || e.worker, ', ') FROM effects e WHERE e.job_id = j.id), '-'))
		FROM unnest($1::bigint[], $2::bigint[]) AS s(id, fence) JOIN pgqueue.jobs j ON j.id = s.id
		WHERE NOT (j.state = 'completed' AND EXISTS (SELECT 1 FROM effects e WHERE e.job_id = j.id AND e.fence = j.fence
		           AND (e.fence > s.fence OR e.worker = $3)))`,
		ids, fences, victim.name) {
		t.Errorf("held job ended wrongly: %s", line)
	}
	// Every write the victim attempted after it resumed about a job taken
	// over was refused, and it did attempt one for each: its handlers were
	// mid-transaction, deaf to their cancelled context. A job claimed ahead
	// of a free handler was handed back instead, a result the database
	// refused (the client logged it).
	for _, line := range e.evidence(t.Context(), `
		SELECT format('%s|%s|job %s held by %s at fence %s, taken over at fence %s: no refusal of its write recorded', s.id, s.fence, s.id, $3::text, s.fence, j.fence)
		FROM unnest($1::bigint[], $2::bigint[]) AS s(id, fence) JOIN pgqueue.jobs j ON j.id = s.id
		WHERE j.fence > s.fence AND NOT EXISTS (
		    SELECT 1 FROM refusals r WHERE r.job_id = s.id AND r.fence = s.fence AND r.worker = $3 AND r.reason IN ($4, $5))`,
		ids, fences, victim.name, faultReasonStaleFence, faultReasonLeaseLost) {
		id, rest, _ := strings.Cut(line, "|")
		fence, msg, _ := strings.Cut(rest, "|")
		handedBack := victim.sawLine("event handed-back job="+id+" ", true) &&
			victim.sawLine("event result-refused job="+id+" fence="+fence, false)
		if !handedBack {
			t.Errorf("paused worker's write not refused: %s", msg)
		}
	}
	if takenOver == 0 {
		t.Errorf("none of the %d jobs %s held was taken over during a %s pause with a %s lease; sessions waiting on locks at the end of the pause:\n  %s",
			len(held), victim.name, pause, faultLease, strings.Join(waits, "\n  "))
	}
	e.report("WorkerPaused", 1, fmt.Sprintf("SIGSTOP of 1 of 4 workers for %s", pause), f,
		fmt.Sprintf("held=%d taken_over_during_pause=%d completed_elsewhere_during_pause=%d victim_stale_refused=%d victim_refusals_on_held_jobs=%d",
			len(held), takenOver, doneElsewhere, refusedVictim, refusedHeld))
}

// TestFaultBackendsTerminated has the server end the workers' sessions with
// pg_terminate_backend every 300ms for a few seconds.
func TestFaultBackendsTerminated(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, faultJobs())
	e.startWorkers(4, faultWorkerOpts{})
	e.waitProgress(e.jobs / 10)

	var terminated, rounds int64
	for range 10 {
		done, err := e.finished(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if done == int64(e.jobs) {
			break
		}
		n := e.mustCount(`SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name LIKE $1`, faultAppPrefix+"%")
		terminated += n
		rounds++
		time.Sleep(300 * time.Millisecond)
	}
	if terminated == 0 {
		t.Fatal("no worker session was terminated")
	}

	e.waitAllFinal()
	e.stopWorkers()
	f := e.check()
	e.report("BackendsTerminated", terminated, fmt.Sprintf("sessions terminated in %d rounds", rounds), f, "")
}

// TestFaultServerRestart crashes the server (immediate stop, no
// checkpoint) in the middle of the run and starts it again: the workers
// reconnect and finish, and every fence handed out after the restart is
// greater than every fence handed out before it.
func TestFaultServerRestart(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, faultJobs())
	e.startWorkers(4, faultWorkerOpts{})
	e.waitProgress(e.jobs / 3)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := e.server.StopImmediate(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := e.server.Start(ctx); err != nil {
		t.Fatal(err)
	}

	e.waitAllFinal()
	e.stopWorkers()
	f := e.check()

	type boot struct {
		at                 time.Time
		minFence, maxFence int64
		n                  int64
	}
	rows, err := e.db.Query(ctx, `SELECT boot, min(fence), max(fence), count(*) FROM claims GROUP BY boot ORDER BY boot`)
	if err != nil {
		t.Fatal(err)
	}
	var boots []boot
	for rows.Next() {
		var b boot
		if err := rows.Scan(&b.at, &b.minFence, &b.maxFence, &b.n); err != nil {
			t.Fatal(err)
		}
		boots = append(boots, b)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(boots) != 2 {
		t.Fatalf("fences were given under %d server boots, want 2: %+v", len(boots), boots)
	}
	before, after := boots[0], boots[1]
	if before.maxFence >= after.minFence {
		t.Fatalf("fences went back across the restart: max before %d >= min after %d", before.maxFence, after.minFence)
	}
	e.report("ServerRestart", 1, "immediate stop + start", f,
		fmt.Sprintf("fences_before=%d..%d (%d) fences_after=%d..%d (%d)", before.minFence, before.maxFence, before.n, after.minFence, after.maxFence, after.n))
}

// TestFaultProxyCuts puts the workers behind a proxy that cuts their
// connections at random, mid-statement, mid-transaction or idle.
func TestFaultProxyCuts(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, faultJobs())
	p := startFaultProxy(t, e)
	// Cuts start once the workers are up: a worker that cannot start is
	// not the fault under test. Per connection per second: a worker has
	// about 8 connections.
	e.startWorkers(4, faultWorkerOpts{db: faultProxyURL(t, p, e)})
	p.CutRandom(0.15)

	e.waitUntilFinalOr(15*time.Second, func() { p.CutRandom(0) })
	p.CutRandom(0)
	e.waitAllFinal()
	e.stopWorkers()
	f := e.check()
	s := p.Stats()
	if s.Cuts == 0 {
		t.Fatal("the proxy cut no connection")
	}
	e.report("ProxyCuts", s.Cuts, "connections cut at random", f, fmt.Sprintf("connections=%d", s.Accepted))
}

// TestFaultProxyDropsCommitReply puts the workers behind a proxy that lets
// some COMMITs through but loses their reply: the transaction committed,
// the worker thinks it failed. The job must still complete exactly once.
func TestFaultProxyDropsCommitReply(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, faultJobs())
	p := startFaultProxy(t, e)
	p.DropCommitReply(0.05)
	e.startWorkers(4, faultWorkerOpts{db: faultProxyURL(t, p, e)})

	e.waitUntilFinalOr(15*time.Second, func() { p.DropCommitReply(0) })
	p.DropCommitReply(0)
	e.waitAllFinal()
	e.stopWorkers()
	f := e.check()
	s := p.Stats()
	if s.CommitRepliesDropped == 0 {
		t.Fatal("the proxy dropped no commit reply")
	}
	if f.ambiguousLanded == 0 {
		t.Errorf("none of the %d commits whose reply was dropped took effect", s.CommitRepliesDropped)
	}
	e.report("ProxyDropsCommitReply", s.CommitRepliesDropped, "commit replies dropped", f, fmt.Sprintf("commits_seen=%d", s.CommitsSeen))
}

// TestFaultHungHolderDoesNotBlockRescue pauses a worker while its handlers
// hold their jobs' row locks (between CompleteTx and COMMIT) and kills
// another: the killed worker's jobs must be rescued and redone, and every
// other job done, while the paused one still hangs, since a frozen process
// (SIGSTOP, a VM pause) may hold its locks for any length of time.
func TestFaultHungHolderDoesNotBlockRescue(t *testing.T) {
	t.Parallel()
	// The point is the rescue, not the volume, but the queue must not run
	// dry before both faults are in.
	e := newFaultEnv(t, max(faultJobs()/2, 500))
	// Its handlers spend nearly all their time holding the job's row lock.
	hung := e.startWorker("w1", faultWorkerOpts{sleepAt: "after-complete", sleepMin: 200 * time.Millisecond, sleepMax: 400 * time.Millisecond})
	hung.waitReady(t)

	// The hung worker is caught first, so its leases run out first: from
	// then on its jobs are among those every rescue looks at. It works
	// alone until then: the fast workers, started with it, could empty
	// the queue before it had done enough to be caught.
	hungHeld, stopped := e.freeze(hung)
	t.Cleanup(func() { _ = hung.signal(syscall.SIGCONT) })
	killed := e.startWorkers(3, faultWorkerOpts{})[0] // w2; w3 and w4 go on working
	e.freeze(killed)
	if err := killed.signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-killed.exited
	e.waitSessionsGone(killed.name)
	orphans := e.runningJobs(killed.name)
	if len(orphans) == 0 {
		t.Fatalf("%s held no running job when killed", killed.name)
	}
	ids, fences := faultSplitJobs(orphans)

	// Every job but the hung worker's must become final while it hangs,
	// the orphans among them. How soon is not the point: a rescued job
	// retries after a delay, so it queues behind the jobs still waiting,
	// and a loaded machine is slow. The wait fails only when no job
	// becomes final for faultStall: then the hung holder blocks the rest.
	hungIDs, _ := faultSplitJobs(hungHeld)
	e.waitFinalExcept("every job but "+hung.name+"'s is final while it hangs", hungIDs, func() string {
		return "sessions waiting on locks:\n  " + strings.Join(e.lockWaits(), "\n  ")
	})
	pausedFor := time.Since(stopped)
	redone := e.mustCount(`SELECT count(*) FROM unnest($1::bigint[], $2::bigint[]) AS s(id, fence) JOIN pgqueue.jobs j ON j.id = s.id WHERE j.state = 'completed' AND j.fence > s.fence`, ids, fences)
	if err := hung.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	e.waitAllFinal()
	e.stopWorkers()
	f := e.check()
	extra := fmt.Sprintf("orphans=%d hung_held=%d orphans_redone_during_pause=%d paused_until_others_final=%s",
		len(orphans), len(hungHeld), redone, pausedFor.Round(100*time.Millisecond))
	e.report("HungHolder", 2, "SIGSTOP of a worker between CompleteTx and COMMIT + SIGKILL of another", f, extra)
	if redone != int64(len(orphans)) {
		t.Fatalf("%d of the killed worker's %d jobs were redone under a new fence while another worker hung holding row locks (%s)", redone, len(orphans), extra)
	}
}

// TestFaultPausedWorkerRefusedByFence pauses two workers (SIGSTOP) while
// they hold jobs, lets a third take every one of those jobs over and hold
// it running under its own, newer fence, then resumes the paused workers:
// each of their stale writes meets a job that is still running, so only
// the fence condition of its statement can refuse it. The writes, one kind
// per job (faultworker -victim):
//
//   - CompleteTx after a CheckFenceTx that passes (the holder has not
//     checked yet), and CompleteTx alone: sql/complete.sql;
//   - heartbeats of the jobs still in their handlers: sql/heartbeat.sql;
//   - complete results pending in one worker's completer, written when it
//     stops: sql/complete_many.sql;
//   - failure and snooze results pending in the other's: sql/finish.sql.
//
// The jobs must stay exactly as the holder has them (a trigger records any
// write to a running job from another session), each refusal must be
// seen, and once released the holder completes every job exactly once.
func TestFaultPausedWorkerRefusedByFence(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, 0)
	ctx := t.Context()
	type victimQueue struct {
		queue string
		modes []string
	}
	queues := []victimQueue{
		// One worker's pending results are all completions: complete_many.
		{"fenced-a", []string{"complete", "complete", "complete", "complete", "gate-complete"}},
		// The other's are failures and snoozes: finish.sql.
		{"fenced-b", []string{"tx-checked", "tx-checked", "tx", "tx", "fail", "fail", "snooze", "snooze"}},
	}
	var params []pgqueue.EnqueueManyParams
	for _, q := range queues {
		for _, m := range q.modes {
			params = append(params, pgqueue.EnqueueManyParams{Args: faultEffectArgs{N: len(params), Mode: m}, Opts: &pgqueue.EnqueueOpts{Queue: q.queue}})
		}
	}
	client, err := pgqueue.New(e.db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := client.EnqueueMany(ctx, params); err != nil || res.Enqueued != int64(len(params)) {
		t.Fatalf("enqueue: %+v, %v", res, err)
	}
	e.jobs = len(params)
	// Results stay pending until the worker stops.
	victimFlags := []string{"-victim", "-complete-batch-delay", "1h"}
	victims := []*workerProc{
		e.startWorker("w1", faultWorkerOpts{queues: []string{"fenced-a"}, maxWorkers: 8, extra: victimFlags}),
		e.startWorker("w2", faultWorkerOpts{queues: []string{"fenced-b"}, maxWorkers: 8, extra: victimFlags}),
	}
	for _, v := range victims {
		v.waitReady(t)
	}

	// Every job is running under its victim, every immediate result has
	// been returned, and a heartbeat after that renewed the jobs still in
	// their handlers but not those: their results are in the completer.
	e.waitUntil("the victims hold every job, their immediate results handed over", time.Minute, func(ctx context.Context) (bool, error) {
		n, err := e.count(ctx, `
			SELECT count(*) FROM (
			    SELECT j.queue,
			           bool_and(j.state = 'running') AS running,
			           count(*) FILTER (WHERE j.args->>'mode' IN ('complete', 'fail', 'snooze')
			                            AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.job_id = j.id AND s.step = 'returned')) AS unreturned,
			           count(*) FILTER (WHERE j.args->>'mode' IN ('tx-checked', 'tx', 'gate-complete')
			                            AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.job_id = j.id AND s.step = 'gate')) AS ungated,
			           min(j.lease_until) FILTER (WHERE j.args->>'mode' IN ('tx-checked', 'tx', 'gate-complete')) AS gated_lease,
			           max(j.lease_until) FILTER (WHERE j.args->>'mode' IN ('complete', 'fail', 'snooze')) AS returned_lease
			    FROM pgqueue.jobs j GROUP BY j.queue) q
			WHERE running AND unreturned = 0 AND ungated = 0 AND gated_lease > returned_lease`)
		return n == int64(len(queues)), err
	})
	for _, v := range victims {
		if err := v.signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	held := map[int64]int64{}
	for _, v := range victims {
		maps.Copy(held, e.runningJobs(v.name))
	}
	if len(held) != len(params) {
		t.Fatalf("the victims hold %d of %d jobs", len(held), len(params))
	}
	ids, fences := faultSplitJobs(held)
	if _, err := e.db.Exec(ctx, `INSERT INTO holds (job_id, fence) SELECT * FROM unnest($1::bigint[], $2::bigint[])`, ids, fences); err != nil {
		t.Fatal(err)
	}

	// The taker rescues (once it leads) and claims every job, and holds it.
	taker := e.startWorker("w3", faultWorkerOpts{queues: []string{"fenced-a", "fenced-b"}, maxWorkers: 16, extra: []string{"-hold"}})
	taker.waitReady(t)
	const takenOver = `
		SELECT count(*) FROM unnest($1::bigint[], $2::bigint[]) AS s(id, fence) JOIN pgqueue.jobs j ON j.id = s.id
		WHERE j.state = 'running' AND j.worker_id = 'w3' AND j.fence > s.fence
		  AND EXISTS (SELECT 1 FROM steps st WHERE st.job_id = j.id AND st.fence = j.fence AND st.step = 'holding')`
	e.waitUntil("the taker holds every job under a newer fence", time.Minute, func(ctx context.Context) (bool, error) {
		n, err := e.count(ctx, takenOver, ids, fences)
		return n == int64(len(held)), err
	})
	takerIDs, takerFenceList := faultSplitJobs(e.runningJobs("w3"))

	// The victims resume and write.
	if _, err := e.db.Exec(ctx, `INSERT INTO gates VALUES ('victims-write')`); err != nil {
		t.Fatal(err)
	}
	for _, v := range victims {
		if err := v.signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	e.waitUntil("the resumed victims wrote after the gate", time.Minute, func(ctx context.Context) (bool, error) {
		n, err := e.count(ctx, `SELECT count(*) FROM steps WHERE step = 'wrote'`)
		return n == 5, err
	})
	// Their pending results are written as they stop.
	for i, err := range stopProcs(victims, 20*time.Second) {
		if err != nil {
			t.Errorf("graceful stop of %s: %v\n%s", victims[i].name, err, victims[i].logTail())
		}
	}

	// Every write was refused, and by the fence: the jobs are untouched.
	for _, line := range e.evidence(ctx, `
		SELECT format('job %s (%s) held by w3 at fence %s: now %s, fence %s, worker %s, lease_until %s, attempt %s, errors %s',
		              j.id, j.args->>'mode', s.fence, j.state, j.fence, j.worker_id, j.lease_until, j.attempt, j.errors)
		FROM unnest($1::bigint[], $2::bigint[]) AS s(id, fence) JOIN pgqueue.jobs j ON j.id = s.id
		WHERE NOT (j.state = 'running' AND j.fence = s.fence AND j.worker_id = 'w3' AND jsonb_array_length(j.errors) = 1)`,
		takerIDs, takerFenceList) {
		t.Errorf("a stale write changed a job held by another worker: %s", line)
	}
	for _, line := range e.evidence(ctx, `SELECT format('job %s: %s -> %s by %s (holder %s)', job_id, old_state, new_state, writer, holder) FROM foreign_writes ORDER BY id`) {
		t.Errorf("stale write landed: %s", line)
	}
	victimOf := map[string]*workerProc{"fenced-a": victims[0], "fenced-b": victims[1]}
	rows, err := e.db.Query(ctx, `SELECT id, queue, args->>'mode' FROM pgqueue.jobs ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	refusedCompleteTx := e.mustCount(`SELECT count(*) FROM refusals WHERE reason = $1`, faultReasonLeaseLost)
	var id int64
	var queue, mode string
	_, err = pgx.ForEachRow(rows, []any{&id, &queue, &mode}, func() error {
		v := victimOf[queue]
		want := []string{}
		switch mode {
		case "complete", "fail", "snooze":
			want = append(want, "result-refused")
		default:
			want = append(want, "lease-lost")
		}
		for _, ev := range want {
			if !v.sawLine(fmt.Sprintf("event %s job=%d fence=%d", ev, id, held[id]), false) {
				t.Errorf("%s: no %s of its %s write about job %d (fence %d)\n%s", v.name, ev, mode, id, held[id], v.logTail())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if refusedCompleteTx != 4 {
		t.Errorf("%d CompleteTx refused as lease lost, want 4 (2 after CheckFenceTx, 2 without)", refusedCompleteTx)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Released, the holder completes every job once.
	if _, err := e.db.Exec(ctx, `UPDATE holds SET released = true`); err != nil {
		t.Fatal(err)
	}
	e.waitAllFinal()
	e.stopWorkers()
	f := e.check()
	if n := e.mustCount(`SELECT count(*) FROM effects WHERE worker <> 'w3'`); n != 0 {
		t.Errorf("%d effects by the paused workers", n)
	}
	e.report("PausedWorkerFenced", 2, "SIGSTOP of 2 workers while a third holds their jobs", f,
		fmt.Sprintf("held=%d completetx_refused=%d results_refused=%d heartbeats_refused=%d", len(held), refusedCompleteTx, 8, 5))
}
