package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/internal/schemaversion"
	"github.com/pgqueue/pgqueue/pglock"
)

type opsJob struct {
	N int `json:"n"`
}

func (opsJob) Kind() string { return "ops_done" }

type opsFail struct{}

func (opsFail) Kind() string { return "ops_fail" }

type opsBlock struct{}

func (opsBlock) Kind() string { return "ops_block" }

// opsBundle is a migrated database with jobs in every state the commands
// show, and a started client that runs two blocking jobs.
type opsBundle struct {
	url      string
	readOnly string // url with every transaction read-only
	pool     *pgxpool.Pool
	client   *pgqueue.Client // enqueue-only
	worker   *pgqueue.Client // started, ID "ops-worker"

	completed, discarded, available, scheduled int64
	running, singleton                         int64
}

const opsWorkerID = "ops-worker"

func setupOps(t *testing.T) *opsBundle {
	t.Helper()
	ctx := t.Context()
	b := &opsBundle{url: pgtest.DB().NewDatabase(t)}
	sep := "?"
	if strings.Contains(b.url, "?") {
		sep = "&"
	}
	b.readOnly = b.url + sep + "default_transaction_read_only=on"
	var err error
	if b.pool, err = pgxpool.New(ctx, b.url); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.pool.Close)
	if _, err := pgqueue.Migrate(ctx, b.pool, pgqueue.SchemaDefault); err != nil {
		t.Fatal(err)
	}
	if b.client, err = pgqueue.New(b.pool, nil); err != nil {
		t.Fatal(err)
	}
	enqueue := func(args pgqueue.JobArgs, opts *pgqueue.EnqueueOpts) int64 {
		t.Helper()
		res, err := b.client.Enqueue(ctx, args, opts)
		if err != nil {
			t.Fatal(err)
		}
		return res.ID
	}

	workers := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[opsJob]) error {
		return pgqueue.RecordOutput(ctx, map[string]int{"result": job.Args.N * 2})
	}, nil))
	must(t, pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[opsFail]) error {
		panic("boom from ops_fail")
	}, nil))
	started := make(chan int64, 10)
	must(t, pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[opsBlock]) error {
		started <- job.ID // a singleton's handler runs under its lock
		<-ctx.Done()
		return context.Cause(ctx)
	}, nil))
	if b.worker, err = pgqueue.New(b.pool, &pgqueue.Config{ID: opsWorkerID, Workers: workers,
		Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 5}}}); err != nil {
		t.Fatal(err)
	}
	must(t, b.worker.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = b.worker.Stop(stopCtx)
	})

	b.completed = enqueue(opsJob{N: 21}, nil)
	b.discarded = enqueue(opsFail{}, &pgqueue.EnqueueOpts{MaxAttempts: 1})
	b.running = enqueue(opsBlock{}, nil)
	b.singleton = enqueue(opsBlock{}, &pgqueue.EnqueueOpts{SingletonKey: "report"})
	b.scheduled = enqueue(opsJob{N: 1}, &pgqueue.EnqueueOpts{Queue: "later", RunAt: time.Now().Add(time.Hour), Tags: []string{"nightly"},
		PartitionKey: "tenant-7", SequenceKey: "nightly-7"})
	b.waitState(t, b.completed, pgqueue.StateCompleted)
	b.waitState(t, b.discarded, pgqueue.StateDiscarded)
	for range 2 {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("blocking jobs did not start")
		}
	}
	// Enqueued after the others ran, in a queue nobody works.
	b.available = enqueue(opsJob{N: 2}, &pgqueue.EnqueueOpts{Queue: "idle"})
	return b
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitState polls the job until it is in state: a condition, not a time.
func (b *opsBundle) waitState(t *testing.T, id int64, state pgqueue.JobState) *pgqueue.JobRow {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		job, err := b.client.JobGet(t.Context(), id)
		if err != nil && !errors.Is(err, pgqueue.ErrJobNotFound) {
			t.Fatal(err)
		}
		if job != nil && job.State == state {
			return job
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d is %v, want %s", id, job, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cli runs a command line and checks its exit code; it returns stdout.
func cli(t *testing.T, wantCode int, args ...string) string {
	t.Helper()
	code, stdout, stderr := runCLI(t.Context(), args...)
	if code != wantCode {
		t.Fatalf("%q: exit code %d, want %d\nstdout: %s\nstderr: %s", args, code, wantCode, stdout, stderr)
	}
	return stdout + stderr
}

func contains(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// compact returns raw without insignificant space.
func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	must(t, json.Compact(&b, raw))
	return b.String()
}

func id(n int64) string { return strconv.FormatInt(n, 10) }

// TestReadCommands runs every read command on a connection whose
// transactions are read-only: a write would fail the command.
func TestReadCommands(t *testing.T) {
	t.Parallel()
	b := setupOps(t)
	db := []string{"--database-url", b.readOnly}

	t.Run("JobsList", func(t *testing.T) {
		out := cli(t, exitOK, append([]string{"jobs", "list"}, db...)...)
		contains(t, out, "ID", "STATE", "LAST ERROR", "ops_fail", "discarded", "boom from ops_fail", "ops_block", "running")
		lines := strings.Split(out, "\n")
		// Newest first: the available job was enqueued last.
		if !strings.HasPrefix(lines[1], id(b.available)+" ") {
			t.Errorf("first row %q, want job %d", lines[1], b.available)
		}
	})
	t.Run("JobsListFiltersJSON", func(t *testing.T) {
		out := cli(t, exitOK, append([]string{"jobs", "list", "--state", "discarded,completed", "--kind", "ops_fail", "--json"}, db...)...)
		var res struct {
			Jobs []jobJSON `json:"jobs"`
		}
		must(t, json.Unmarshal([]byte(out), &res))
		if len(res.Jobs) != 1 || res.Jobs[0].ID != b.discarded || len(res.Jobs[0].Errors) != 1 || res.Jobs[0].Errors[0].Trace == "" {
			t.Errorf("jobs %+v", res.Jobs)
		}
		out = cli(t, exitOK, append([]string{"jobs", "list", "--tag", "nightly", "--queue", "later", "--args", `{"n":1}`, "--json"}, db...)...)
		must(t, json.Unmarshal([]byte(out), &res))
		if len(res.Jobs) != 1 || res.Jobs[0].ID != b.scheduled || compact(t, res.Jobs[0].Args) != `{"n":1}` {
			t.Errorf("jobs %+v", res.Jobs)
		}
	})
	t.Run("JobsListPages", func(t *testing.T) {
		out := cli(t, exitOK, append([]string{"jobs", "list", "--limit", "2", "--asc"}, db...)...)
		_, cursor, ok := strings.Cut(out, "next page: --cursor ")
		if !ok {
			t.Fatalf("no cursor:\n%s", out)
		}
		cursor = strings.TrimSpace(cursor)
		if !strings.Contains(out, "\n"+id(b.completed)+" ") || strings.Contains(out, "\n"+id(b.running)+" ") {
			t.Errorf("first page:\n%s", out)
		}
		out = cli(t, exitOK, append([]string{"jobs", "list", "--limit", "2", "--asc", "--cursor", cursor}, db...)...)
		if !strings.Contains(out, "\n"+id(b.running)+" ") || strings.Contains(out, "\n"+id(b.completed)+" ") {
			t.Errorf("second page:\n%s", out)
		}
		// A cursor from another ordering is a usage error.
		cli(t, exitUsage, append([]string{"jobs", "list", "--cursor", cursor}, db...)...)
	})
	t.Run("JobsGet", func(t *testing.T) {
		out := cli(t, exitOK, append([]string{"jobs", "get", id(b.discarded)}, db...)...)
		contains(t, out, "state:", "discarded", "attempt:", "1 of 1", "fence:", "worker:", opsWorkerID,
			"attempt 1 at", "boom from ops_fail", "goroutine") // the panic's stack
		out = cli(t, exitOK, append([]string{"jobs", "get", id(b.completed)}, db...)...)
		contains(t, out, "output:", `"result": 42`, "args:", `"n": 21`, "errors: none")
		out = cli(t, exitOK, append([]string{"jobs", "get", id(b.singleton), "--json"}, db...)...)
		var j jobJSON
		must(t, json.Unmarshal([]byte(out), &j))
		if j.ID != b.singleton || j.State != pgqueue.StateRunning || j.SingletonKey != "report" || j.Fence == 0 || j.LeaseUntil == nil {
			t.Errorf("job %+v", j)
		}
		if strings.Contains(out, "partition_key") || strings.Contains(out, "sequence_key") {
			t.Errorf("a job without flow keys shows them:\n%s", out)
		}
		// The flow keys, when set.
		out = cli(t, exitOK, append([]string{"jobs", "get", id(b.scheduled)}, db...)...)
		contains(t, out, "partition key:", "tenant-7", "sequence key:", "nightly-7")
		out = cli(t, exitOK, append([]string{"jobs", "get", id(b.scheduled), "--json"}, db...)...)
		j = jobJSON{}
		must(t, json.Unmarshal([]byte(out), &j))
		if j.PartitionKey != "tenant-7" || j.SequenceKey != "nightly-7" {
			t.Errorf("job --json %+v", j)
		}
		if out = cli(t, exitOK, append([]string{"jobs", "get", id(b.completed)}, db...)...); strings.Contains(out, "partition key:") {
			t.Errorf("a job without flow keys shows them:\n%s", out)
		}
	})
	t.Run("JobsGetNotFound", func(t *testing.T) {
		out := cli(t, exitNotFound, append([]string{"jobs", "get", "99999999"}, db...)...)
		contains(t, out, "job 99999999 not found")
	})
	t.Run("QueuesList", func(t *testing.T) {
		out := cli(t, exitOK, append([]string{"queues", "list"}, db...)...)
		contains(t, out, "QUEUE", "PAUSED", "OLDEST AVAILABLE", "later", "idle", "default")
		out = cli(t, exitOK, append([]string{"queues", "list", "--json"}, db...)...)
		var qs []queueJSON
		must(t, json.Unmarshal([]byte(out), &qs))
		got := map[string]queueJSON{}
		for _, q := range qs {
			got[q.Name] = q
		}
		if q := got["later"]; q.Scheduled != 1 || q.Paused {
			t.Errorf("later: %+v", q)
		}
		if q := got["default"]; q.Running != 2 {
			t.Errorf("default: %+v", q)
		}
		if q := got["idle"]; q.Available != 1 || q.OldestAvailableAt == nil {
			t.Errorf("idle: %+v", q)
		}
	})
	t.Run("Stats", func(t *testing.T) {
		out := cli(t, exitOK, append([]string{"stats"}, db...)...)
		contains(t, out, "COMPLETED 1m/1h", "WORKER", opsWorkerID)
		out = cli(t, exitOK, append([]string{"stats", "--json"}, db...)...)
		var s statsJSON
		must(t, json.Unmarshal([]byte(out), &s))
		var def *queueStats
		for _, q := range s.Queues {
			if q.Name == "default" {
				def = q
			}
		}
		if def == nil || def.Finished["completed"] != (finishedCounts{1, 1}) || def.Finished["discarded"] != (finishedCounts{1, 1}) || def.Running != 2 {
			t.Errorf("default queue: %+v", def)
		}
		if len(s.Workers) != 1 || s.Workers[0].WorkerID != opsWorkerID || s.Workers[0].Running != 2 {
			t.Errorf("workers: %+v", s.Workers)
		}
	})
	t.Run("StatsWatch", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w := &frameWriter{frames: 2, done: cancel}
		code := run(ctx, append([]string{"stats", "--watch", "--interval", "20ms"}, db...), w, w)
		out := w.String()
		if code != exitOK {
			t.Fatalf("exit code %d:\n%s", code, out)
		}
		if n := strings.Count(out, "\x1b[H\x1b[2J"); n < 2 {
			t.Errorf("%d frames, want at least 2:\n%s", n, out)
		}
		contains(t, out, "every 20ms", opsWorkerID)
	})
	t.Run("Locks", func(t *testing.T) {
		// The worker leads maintenance with SessionFailover (its pool is
		// direct): its elector holds this session lock.
		electorLock := pglock.ElectorSessionLock("pgqueue:maintenance")
		out := cli(t, exitOK, append([]string{"locks"}, db...)...)
		contains(t, out, "LEASE LOCKS", "pgqueue:maintenance", opsWorkerID, "ADVISORY LOCKS", "singleton:report", "ExclusiveLock", electorLock)
		out = cli(t, exitOK, append([]string{"locks", "--json"}, db...)...)
		var l locksJSON
		must(t, json.Unmarshal([]byte(out), &l))
		if len(l.Leases) != 1 || l.Leases[0].Holder != opsWorkerID || l.Leases[0].Expired {
			t.Errorf("leases %+v", l.Leases)
		}
		var found bool
		for _, a := range l.Advisory {
			if a.Name == "singleton:report" {
				found = a.Owner == "pgqueue" && a.Granted && a.PID != 0
			}
		}
		if !found {
			t.Errorf("no granted singleton:report lock: %+v", l.Advisory)
		}
		found = false
		for _, a := range l.Advisory {
			found = found || (a.Name == electorLock && a.Owner == "pgqueue" && a.Granted)
		}
		if !found {
			t.Errorf("no granted %s lock: %+v", electorLock, l.Advisory)
		}
	})
	t.Run("MigrateVersion", func(t *testing.T) {
		out := cli(t, exitOK, append([]string{"migrate", "version"}, db...)...)
		if strings.TrimSpace(out) != fmt.Sprint(schemaversion.Latest()) {
			t.Errorf("version %q, want %d", out, schemaversion.Latest())
		}
		out = cli(t, exitOK, append([]string{"migrate", "version", "--json"}, db...)...)
		contains(t, out, fmt.Sprintf(`"version": %d`, schemaversion.Latest()), `"dirty": false`)
		// A schema never migrated: "none", and still nothing created.
		out = cli(t, exitOK, append([]string{"migrate", "version", "--schema", "fresh"}, db...)...)
		if strings.TrimSpace(out) != "none" {
			t.Errorf("version %q, want none", out)
		}
		var n int
		must(t, b.pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_namespace WHERE nspname = 'fresh'").Scan(&n))
		if n != 0 {
			t.Error("migrate version created the schema")
		}
	})
	t.Run("WritesFailReadOnly", func(t *testing.T) {
		// The read-only connection does refuse writes: the checks above
		// would catch a read command that wrote.
		out := cli(t, exitError, append([]string{"queues", "pause", "x"}, db...)...)
		contains(t, out, "read-only")
	})
}

// frameWriter collects output and calls done once it has seen frames
// --watch frames.
type frameWriter struct {
	mu     sync.Mutex
	b      strings.Builder
	frames int
	done   func()
}

func (w *frameWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Count(w.b.String(), "\x1b[H\x1b[2J") > w.frames {
		w.done()
	}
	return len(p), nil
}

func (w *frameWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func TestControlCommands(t *testing.T) {
	t.Parallel()
	b := setupOps(t)
	db := []string{"--database-url", b.url}

	t.Run("RetryDiscarded", func(t *testing.T) {
		out := cli(t, exitOK, append([]string{"jobs", "retry", id(b.discarded)}, db...)...)
		contains(t, out, "retried: "+id(b.discarded))
		// It runs again and fails again: one more attempt, history kept.
		job := b.waitState(t, b.discarded, pgqueue.StateDiscarded)
		if job.Attempt != 2 || len(job.Errors) != 2 {
			t.Errorf("attempt %d, %d errors", job.Attempt, len(job.Errors))
		}
	})
	t.Run("RetryRefusesRunningAndMissing", func(t *testing.T) {
		out := cli(t, exitError, append([]string{"jobs", "retry", id(b.running)}, db...)...)
		contains(t, out, "running, refused (cancel it first): "+id(b.running))
		out = cli(t, exitNotFound, append([]string{"jobs", "retry", id(b.available), "99999999", "--json"}, db...)...)
		var res controlResult
		must(t, json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &res))
		if len(res.Unchanged) != 1 || res.Unchanged[0] != b.available || len(res.NotFound) != 1 {
			t.Errorf("result %+v", res)
		}
	})
	t.Run("CancelRunningAndAvailable", func(t *testing.T) {
		out := cli(t, exitOK, append([]string{"jobs", "cancel", id(b.running), id(b.available), id(b.completed)}, db...)...)
		contains(t, out, "running, cancel requested (its worker stops it): "+id(b.running),
			"cancelled: "+id(b.available), "already completed or discarded, unchanged: "+id(b.completed))
		b.waitState(t, b.running, pgqueue.StateCancelled)
		cli(t, exitNotFound, append([]string{"jobs", "cancel", "99999999"}, db...)...)
	})
	t.Run("Delete", func(t *testing.T) {
		out := cli(t, exitError, append([]string{"jobs", "delete", id(b.singleton)}, db...)...)
		contains(t, out, "running, refused")
		out = cli(t, exitOK, append([]string{"jobs", "delete", id(b.completed), id(b.available)}, db...)...)
		contains(t, out, "deleted: "+id(b.completed)+" "+id(b.available))
		cli(t, exitNotFound, append([]string{"jobs", "get", id(b.completed)}, db...)...)
	})
	t.Run("PauseResume", func(t *testing.T) {
		out := cli(t, exitOK, append([]string{"queues", "pause", "later", "mail"}, db...)...)
		contains(t, out, "paused later", "paused mail")
		out = cli(t, exitOK, append([]string{"queues", "list"}, db...)...)
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 1 && (f[0] == "later" || f[0] == "mail") && f[1] != "yes" {
				t.Errorf("not paused: %q", line)
			}
		}
		out = cli(t, exitOK, append([]string{"queues", "resume", "later"}, db...)...)
		contains(t, out, "resumed later")
		qs, err := b.client.QueueList(t.Context())
		must(t, err)
		for _, q := range qs {
			if want := q.Name == "mail"; q.Paused != want {
				t.Errorf("queue %s paused %v", q.Name, q.Paused)
			}
		}
		cli(t, exitError, append([]string{"queues", "pause", "Bad Name"}, db...)...)
	})
	t.Run("Enqueue", func(t *testing.T) {
		out := cli(t, exitOK, append([]string{"enqueue", "ops_done", `{"n": 5}`}, db...)...)
		var jobID int64
		if _, err := fmt.Sscanf(out, "enqueued job %d", &jobID); err != nil {
			t.Fatalf("%v: %q", err, out)
		}
		// The started worker runs it.
		job := b.waitState(t, jobID, pgqueue.StateCompleted)
		if string(job.Output) != `{"result": 10}` {
			t.Errorf("output %s", job.Output)
		}
		out = cli(t, exitOK, append([]string{"enqueue", "report", `{"day": "monday"}`, "--queue", "reports",
			"--priority", "3", "--max-attempts", "2", "--tag", "a,b", "--in", "1h", "--json"}, db...)...)
		var j jobJSON
		must(t, json.Unmarshal([]byte(out), &j))
		if j.Kind != "report" || j.Queue != "reports" || j.Priority != 3 || j.MaxAttempts != 2 ||
			j.State != pgqueue.StateScheduled || strings.Join(j.Tags, ",") != "a,b" || compact(t, j.Args) != `{"day":"monday"}` {
			t.Errorf("job %+v", j)
		}
	})
}

func TestOpsUsage(t *testing.T) {
	t.Parallel()
	const url = "postgres://unused"
	tests := []struct {
		args     []string
		wantCode int
		want     string
	}{
		{[]string{"jobs"}, exitUsage, "missing subcommand"},
		{[]string{"jobs", "frob"}, exitUsage, `unknown subcommand "frob"`},
		{[]string{"jobs", "--help"}, exitOK, "Usage: pgqueue jobs"},
		{[]string{"jobs", "list", "-h"}, exitOK, "Usage: pgqueue jobs"},
		{[]string{"jobs", "get", "--database-url", url}, exitUsage, "get takes one job ID"},
		{[]string{"jobs", "get", "abc", "--database-url", url}, exitUsage, "a job ID is a whole number"},
		{[]string{"jobs", "retry", "--database-url", url}, exitUsage, "retry takes one or more job IDs"},
		{[]string{"jobs", "list", "--state", "done", "--database-url", url}, exitUsage, `unknown --state "done"`},
		{[]string{"jobs", "list", "--order", "kind", "--database-url", url}, exitUsage, "--order must be"},
		{[]string{"jobs", "list", "--limit", "0", "--database-url", url}, exitUsage, "--limit must be"},
		{[]string{"jobs", "list", "--args", "[1]", "--database-url", url}, exitUsage, "--args must be a JSON object"},
		{[]string{"jobs", "list", "--created-after", "yesterday", "--database-url", url}, exitUsage, "duration ago"},
		{[]string{"jobs", "list", "--database-url="}, exitUsage, "no database"},
		{[]string{"queues"}, exitUsage, "missing subcommand"},
		{[]string{"queues", "pause", "--database-url", url}, exitUsage, "one or more queue names"},
		{[]string{"stats", "now", "--database-url", url}, exitUsage, "stats takes no arguments"},
		{[]string{"stats", "--interval", "0s", "--database-url", url}, exitUsage, "--interval must be positive"},
		{[]string{"locks", "--schema", "Bad", "--database-url", url}, exitUsage, "invalid --schema"},
		{[]string{"enqueue", "kind", "--database-url", url}, exitUsage, "KIND and ARGS-JSON"},
		{[]string{"enqueue", "kind", "nope", "--database-url", url}, exitUsage, "must be a JSON object"},
		{[]string{"enqueue", "kind", "{}", "--in", "1h", "--run-at", "2030-01-01T00:00:00Z", "--database-url", url}, exitUsage, "exclude each other"},
		{[]string{"migrate", "up", "--json", "--database-url", url}, exitUsage, "--json only goes with version"},
		{[]string{"version", "extra"}, exitUsage, "version takes no arguments"},
		{[]string{"help", "stats"}, exitOK, "--watch"},
		{[]string{"help", "locks"}, exitOK, "pg_stat_activity"},
		{[]string{"help"}, exitOK, "3 a job"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			contains(t, cli(t, tt.wantCode, tt.args...), tt.want)
		})
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	out := cli(t, exitOK, "version")
	contains(t, out, "pgqueue ", "go1.", fmt.Sprintf("schema version %d", schemaversion.Latest()))
	var v versionJSON
	must(t, json.Unmarshal([]byte(cli(t, exitOK, "version", "--json")), &v))
	if v.SchemaVersion != schemaversion.Latest() || v.Version == "" {
		t.Errorf("%+v", v)
	}
}
