//go:build unix

package integration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// The fault test of flow control: eight faultworker processes (-flow) work
// three queues, one with MaxRunning, one with MaxRunningPerKey over
// explicit partition keys, one of sequences, while the test kills, freezes
// and cuts them off from the server at random. Each run of a job is
// recorded with its interval in the transaction of its fenced completion
// (faultworker's flow.go), so the committed runs are exactly the runs that
// counted; the checks then replay them in SQL.

const (
	flowQueueMax = "flow-max" // MaxRunning flowMaxRunning
	flowQueueKey = "flow-key" // MaxRunningPerKey flowPerKey over flowPartitionKeys keys
	flowQueueSeq = "flow-seq" // flowSequences sequences

	flowMaxRunning    = 6
	flowPerKey        = 2
	flowPartitionKeys = 5
	flowSequences     = 6
	flowWorkers       = 8
	flowWorkerSlots   = 3 // each worker's MaxWorkers per queue: 24 slots a queue, above every limit

	// flowMutantEnv, set to 1, loosens the queues (limits doubled, sequence
	// jobs inserted without their SequenceKey) while the checks still expect
	// the real ones: the test must then fail.
	flowMutantEnv = "PGQUEUE_FAULT_FLOW_MUTANT"
)

// faultFlowArgs matches faultworker's FlowArgs.
type faultFlowArgs struct {
	N   int    `json:"n"`
	Key string `json:"key,omitempty"`
}

func (faultFlowArgs) Kind() string { return "flow" }

// flowSchema is what faultworker -flow writes besides faultSchema's tables.
const flowSchema = `
CREATE TABLE flow_runs (
    id            bigserial PRIMARY KEY,
    job_id        bigint NOT NULL,
    fence         bigint NOT NULL,
    worker        text   NOT NULL,
    queue         text   NOT NULL,
    key           text   NOT NULL, -- the key the test meant (the job's args)
    n             bigint NOT NULL,
    partition_key text,            -- the job row's
    sequence_key  text,
    started_at    timestamptz NOT NULL,
    ended_at      timestamptz NOT NULL
);
CREATE INDEX flow_runs_job_idx ON flow_runs (job_id);
`

// faultFlowDuration is how long faults are injected.
func faultFlowDuration() time.Duration {
	if os.Getenv("PGQUEUE_FAULT_LONG") == "1" {
		return 4 * time.Minute
	}
	return 75 * time.Second
}

// TestFaultFlowControl checks that MaxRunning, MaxRunningPerKey and
// sequences hold exactly while workers are killed (SIGKILL), frozen past
// their lease (SIGSTOP, then SIGCONT) and lose their sessions
// (pg_terminate_backend), and that no job is lost.
func TestFaultFlowControl(t *testing.T) {
	t.Parallel()
	duration := faultFlowDuration()
	skipInShortMode(t, fmt.Sprintf("runs %d faultworker processes on three flow-limited queues through SIGKILL, SIGSTOP and terminated backends for %s", flowWorkers, duration))
	mutant := os.Getenv(flowMutantEnv) == "1"
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	t.Logf("seed %d, faults for %s, mutant %v", seed, duration, mutant)

	e := newFaultEnv(t, 0)
	ctx := t.Context()
	if _, err := e.db.Exec(ctx, flowSchema); err != nil {
		t.Fatal(err)
	}
	client, err := pgqueue.New(e.db, nil)
	if err != nil {
		t.Fatal(err)
	}
	grow := 1
	if mutant {
		grow = 2
	}
	if err := client.QueueSetLimits(ctx, flowQueueMax, pgqueue.QueueLimits{MaxRunning: grow * flowMaxRunning}); err != nil {
		t.Fatal(err)
	}
	if err := client.QueueSetLimits(ctx, flowQueueKey, pgqueue.QueueLimits{MaxRunningPerKey: grow * flowPerKey}); err != nil {
		t.Fatal(err)
	}

	f := &flowFeeder{e: e, client: client, mutant: mutant, next: map[string]int{}}
	f.feed()
	opts := faultWorkerOpts{
		maxWorkers: flowWorkerSlots,
		sleepMin:   10 * time.Millisecond,
		sleepMax:   60 * time.Millisecond,
		queues:     []string{flowQueueMax, flowQueueKey, flowQueueSeq},
		// A loaded machine (and a server busy with terminated sessions)
		// can take more than the default 3 s to answer a new connection.
		extra: []string{"-flow", "-connect-timeout", "10s"},
	}
	live := e.startWorkers(flowWorkers, opts)
	// Faults start once every queue is under way.
	e.waitUntil("each flow queue has committed runs", 2*time.Minute, func(ctx context.Context) (bool, error) {
		n, err := e.count(ctx, `SELECT count(DISTINCT queue) FROM flow_runs`)
		return n == 3, err
	})

	// The fault loop, on the test's goroutine: a fault every 0.5-2 s, the
	// three kinds in a shuffled order each round; a frozen worker resumes
	// 2.5-5 s later (past its 2 s lease); a killed one is replaced at once.
	fi := newFaultInjector(e, opts, rng, live)
	began := time.Now()
	deadline := began.Add(duration)
	lastFeed := time.Now()
	for time.Now().Before(deadline) {
		now := time.Now()
		fi.thaw(now)
		if now.Sub(lastFeed) >= 250*time.Millisecond {
			f.feed()
			lastFeed = now
		}
		if !fi.due(now) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		fi.inject()
	}
	fi.thawAll()
	faultsDone := time.Now()

	// Faults off: every job must end.
	e.jobs = f.total
	e.waitUntil("every flow job is final", 5*time.Minute, func(ctx context.Context) (bool, error) {
		done, err := e.finished(ctx)
		return done == int64(e.jobs), err
	})
	e.elapsed = time.Since(e.start)
	drain := time.Since(faultsDone)
	e.stopWorkers()

	peaks := e.checkFlow(ctx, mutant)
	figures := e.check()
	faults := fi.faults()
	e.report("FlowControl", faults,
		fi.summary(duration, flowWorkers),
		figures, fmt.Sprintf("| %s drain=%s seed=%d", peaks, drain.Round(100*time.Millisecond), seed))
}

// startReplacement starts a worker in place of a killed one and waits
// until it is ready. A replacement that fails to start (its first
// connection timed out on a loaded machine) is not the fault under test:
// another one is started, a few times.
func (e *faultEnv) startReplacement(opts faultWorkerOpts) *workerProc {
	e.t.Helper()
	for try := 1; ; try++ {
		e.mu.Lock()
		name := fmt.Sprintf("w%d", len(e.workers)+1)
		e.mu.Unlock()
		w := e.startWorker(name, opts)
		deadline := time.Now().Add(time.Minute)
		for !w.sawLine("ready", false) && time.Now().Before(deadline) {
			select {
			case <-w.exited:
				deadline = time.Time{}
			case <-time.After(20 * time.Millisecond):
			}
		}
		if w.sawLine("ready", false) {
			return w
		}
		w.kill()
		if try == 5 {
			e.t.Fatalf("no replacement worker started in %d tries; the last:\n%s", try, w.logTail())
		}
		e.t.Logf("replacement %s did not start (try %d), starting another:\n%s", name, try, w.logTail())
	}
}

// flowFeeder keeps a backlog in every flow queue (and in every sequence)
// while faults run, so that the limits are always pressed.
type flowFeeder struct {
	e      *faultEnv
	client *pgqueue.Client
	mutant bool
	next   map[string]int // the next N of each queue and sequence key
	total  int
}

// feed tops each queue up to 60 waiting jobs and each sequence to 12, in
// insert order: the jobs of one sequence are inserted by one EnqueueMany
// after another, so their ids follow their N.
func (f *flowFeeder) feed() {
	t := f.e.t
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	waiting := map[string]int64{}
	rows, err := f.e.db.Query(ctx, `
		SELECT queue || '/' || CASE WHEN queue = $1 THEN args->>'key' ELSE '' END, count(*)
		FROM pgqueue.jobs WHERE queue LIKE 'flow-%' AND state IN ('available', 'scheduled')
		GROUP BY 1`, flowQueueSeq)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		waiting[k] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var params []pgqueue.EnqueueManyParams
	add := func(queue, key string, opts pgqueue.EnqueueOpts) {
		counter := queue + "/" + key
		opts.Queue = queue
		opts.MaxAttempts = 1000 // faults must never use a job up
		params = append(params, pgqueue.EnqueueManyParams{Args: faultFlowArgs{N: f.next[counter], Key: key}, Opts: &opts})
		f.next[counter]++
	}
	for n := waiting[flowQueueMax+"/"]; n < 60; n++ {
		add(flowQueueMax, "", pgqueue.EnqueueOpts{})
	}
	for n := waiting[flowQueueKey+"/"]; n < 60; n++ {
		key := fmt.Sprintf("p%d", f.next[flowQueueKey+"/rr"]%flowPartitionKeys)
		f.next[flowQueueKey+"/rr"]++
		add(flowQueueKey, key, pgqueue.EnqueueOpts{PartitionKey: key})
	}
	for s := range flowSequences {
		key := fmt.Sprintf("s%d", s)
		for n := waiting[flowQueueSeq+"/"+key]; n < 12; n++ {
			opts := pgqueue.EnqueueOpts{SequenceKey: key}
			if f.mutant {
				opts.SequenceKey = ""
			}
			add(flowQueueSeq, key, opts)
		}
	}
	if len(params) == 0 {
		return
	}
	res, err := f.client.EnqueueMany(ctx, params)
	if err != nil || res.Enqueued != int64(len(params)) {
		t.Fatalf("enqueue %d flow jobs: %+v, %v", len(params), res, err)
	}
	f.total += len(params)
}

// checkFlow checks the flow guarantees over the committed runs, failing
// the test with every violation, and describes the peaks seen.
func (e *faultEnv) checkFlow(ctx context.Context, mutant bool) string {
	e.t.Helper()
	var violations []string
	check := func(name, query string, args ...any) {
		rows := e.evidence(ctx, query, args...)
		if len(rows) > 0 {
			violations = append(violations, fmt.Sprintf("%s: %d violations, e.g.\n    %s", name, len(rows), strings.Join(rows[:min(len(rows), 10)], "\n    ")))
		}
	}

	check("every flow job completed with exactly one committed run, under its final fence", `
		SELECT format('job %s (%s, key %s, state %s, fence %s): %s runs, fences %s', j.id, j.queue, j.args->>'key', j.state, j.fence,
		              count(r.id), coalesce(string_agg(r.fence::text || ' by ' || r.worker, ', '), '-'))
		FROM pgqueue.jobs j LEFT JOIN flow_runs r ON r.job_id = j.id
		WHERE j.kind = 'flow'
		GROUP BY j.id
		HAVING j.state <> 'completed' OR count(r.id) <> 1 OR bool_or(r.fence IS DISTINCT FROM j.fence)
		ORDER BY j.id`)
	check("every run's interval is well formed", `
		SELECT format('job %s: started %s, ended %s', job_id, started_at, ended_at)
		FROM flow_runs WHERE ended_at < started_at ORDER BY id`)
	if !mutant {
		check("each job carries the key the test gave it", `
			SELECT format('job %s in %s: key %s, partition_key %s, sequence_key %s', job_id, queue, key, partition_key, sequence_key)
			FROM flow_runs
			WHERE (queue = $1 AND partition_key IS DISTINCT FROM key) OR (queue = $2 AND sequence_key IS DISTINCT FROM key)
			ORDER BY id`, flowQueueKey, flowQueueSeq)
	}

	// Overlaps: a sweep over every run's start (+1) and end (-1), ends
	// first at equal instants (touching runs do not overlap).
	type limit struct {
		name, queue, group string
		max                int
	}
	limits := []limit{
		{"MaxRunning", flowQueueMax, "''", flowMaxRunning},
		{"MaxRunningPerKey", flowQueueKey, "key", flowPerKey},
		{"one run at a time per sequence", flowQueueSeq, "key", 1},
	}
	peaks := map[string]int64{}
	for _, l := range limits {
		sweep := `
			WITH ev AS (
			    SELECT ` + l.group + ` AS grp, started_at AS t, 1 AS d, job_id FROM flow_runs WHERE queue = $1
			    UNION ALL
			    SELECT ` + l.group + `, ended_at, -1, job_id FROM flow_runs WHERE queue = $1),
			sweep AS (
			    SELECT grp, t, d, job_id, sum(d) OVER (PARTITION BY grp ORDER BY t, d, job_id ROWS UNBOUNDED PRECEDING) AS running
			    FROM ev)`
		var peak int64
		if err := e.db.QueryRow(ctx, sweep+` SELECT coalesce(max(running), 0) FROM sweep`, l.queue).Scan(&peak); err != nil {
			e.t.Fatal(err)
		}
		peaks[l.queue] = peak
		check(fmt.Sprintf("%s %d in %s: never more runs at once", l.name, l.max, l.queue), sweep+`
			SELECT format('%s runs of %s at %s (key %s): %s', s.running, $1::text, s.t, s.grp,
			              (SELECT string_agg(format('job %s fence %s by %s [%s, %s]', r.job_id, r.fence, r.worker, r.started_at, r.ended_at), '; ' ORDER BY r.started_at)
			               FROM flow_runs r WHERE r.queue = $1 AND `+strings.ReplaceAll(l.group, "key", "r.key")+` = s.grp AND r.started_at <= s.t AND r.ended_at > s.t))
			FROM sweep s WHERE s.d = 1 AND s.running > $2
			ORDER BY s.t`, l.queue, l.max)
	}
	check("each sequence ran in insert order, each job after the previous one ended", `
		SELECT format('sequence %s: job %s (n %s) started %s, before job %s (n %s) ended %s', key, job_id, n, started_at, prev_job, prev_n, prev_end)
		FROM (SELECT key, job_id, n, started_at,
		             lag(job_id) OVER w AS prev_job, lag(n) OVER w AS prev_n, lag(ended_at) OVER w AS prev_end
		      FROM flow_runs WHERE queue = $1 WINDOW w AS (PARTITION BY key ORDER BY job_id)) s
		WHERE prev_end > started_at OR prev_n >= n
		ORDER BY key, job_id`, flowQueueSeq)

	var runs, keyQueuePeak, maxPerSeq int64
	var seqKeys int64
	if err := e.db.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM flow_runs),
		       (SELECT coalesce(max(running), 0) FROM (
		            SELECT sum(d) OVER (ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS running FROM (
		                SELECT started_at AS t, 1 AS d FROM flow_runs WHERE queue = $1
		                UNION ALL SELECT ended_at, -1 FROM flow_runs WHERE queue = $1) ev) s),
		       (SELECT count(DISTINCT key) FROM flow_runs WHERE queue = $2),
		       (SELECT coalesce(max(c), 0) FROM (SELECT count(*) AS c FROM flow_runs WHERE queue = $2 GROUP BY key) x)`,
		flowQueueKey, flowQueueSeq).Scan(&runs, &keyQueuePeak, &seqKeys, &maxPerSeq); err != nil {
		e.t.Fatal(err)
	}
	byQueue := map[string]int64{}
	rows, err := e.db.Query(ctx, `SELECT queue, count(*) FROM flow_runs GROUP BY queue`)
	if err != nil {
		e.t.Fatal(err)
	}
	for rows.Next() {
		var q string
		var n int64
		if err := rows.Scan(&q, &n); err != nil {
			e.t.Fatal(err)
		}
		byQueue[q] = n
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	summary := fmt.Sprintf("runs=%d | %s: MaxRunning=%d peak=%d runs=%d | %s: MaxRunningPerKey=%d keys=%d peak_per_key=%d queue_peak=%d runs=%d | %s: sequences=%d peak_per_sequence=%d runs=%d longest_sequence=%d",
		runs, flowQueueMax, flowMaxRunning, peaks[flowQueueMax], byQueue[flowQueueMax],
		flowQueueKey, flowPerKey, flowPartitionKeys, peaks[flowQueueKey], keyQueuePeak, byQueue[flowQueueKey],
		flowQueueSeq, seqKeys, peaks[flowQueueSeq], byQueue[flowQueueSeq], maxPerSeq)
	if len(violations) > 0 {
		e.t.Fatalf("flow guarantees violated (%s):\n  %s", summary, strings.Join(violations, "\n  "))
	}
	return summary
}
