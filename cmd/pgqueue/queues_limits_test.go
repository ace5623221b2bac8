package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

type limitsJob struct {
	Customer string `json:"customer"`
}

func (limitsJob) Kind() string { return "limits_job" }

// limitsBundle is a migrated database with a client that enqueues and
// reads, and the database's URL plain and read-only.
type limitsBundle struct {
	url, readOnly string
	pool          *pgxpool.Pool
	client        *pgqueue.Client
}

func setupLimits(t *testing.T) *limitsBundle {
	t.Helper()
	ctx := t.Context()
	b := &limitsBundle{url: pgtest.DB().NewDatabase(t)}
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
	return b
}

// stored returns the limits QueueList shows for queue.
func (b *limitsBundle) stored(t *testing.T, queue string) pgqueue.QueueLimits {
	t.Helper()
	qs, err := b.client.QueueList(t.Context())
	must(t, err)
	for _, q := range qs {
		if q.Name == queue {
			return q.Limits
		}
	}
	t.Fatalf("queue %s not listed", queue)
	return pgqueue.QueueLimits{}
}

func TestQueuesLimitSets(t *testing.T) {
	t.Parallel()
	b := setupLimits(t)
	db := []string{"--database-url", b.url}

	t.Run("EveryFlag", func(t *testing.T) {
		out := cli(t, exitOK, append([]string{"queues", "limit", "billing", "--max-running", "40", "--max-running-per-key", "2",
			"--rate", "100/1m", "--rate-per-key", "--partition-by", "kind,args.customer_id", "--sequence-continue"}, db...)...)
		contains(t, out, "set the limits of queue billing", "max running:          40", "max running per key:  2",
			"rate:                 100/1m per partition key", "partition by:         kind,args.customer_id",
			"continue past a discarded or cancelled job")
		want := pgqueue.QueueLimits{MaxRunning: 40, MaxRunningPerKey: 2,
			Rate:             pgqueue.Rate{Limit: 100, Period: time.Minute, PerKey: true},
			PartitionBy:      pgqueue.PartitionBy{Kind: true, ArgsFields: []string{"customer_id"}},
			SequenceContinue: true}
		if got := b.stored(t, "billing"); fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
			t.Errorf("stored %+v, want %+v", got, want)
		}
	})
	t.Run("FlagsStateTheWholeLimits", func(t *testing.T) {
		cli(t, exitOK, append([]string{"queues", "limit", "whole", "--max-running", "5", "--rate", "10/s"}, db...)...)
		out := cli(t, exitOK, append([]string{"queues", "limit", "whole", "--max-running", "3", "--json"}, db...)...)
		var res queueLimitsJSON
		must(t, json.Unmarshal([]byte(out), &res))
		if res.Queue != "whole" || res.Limits.MaxRunning != 3 || res.Limits.Rate != nil || res.Held != nil {
			t.Errorf("printed %+v, want max running 3 and no rate", res)
		}
		if got, want := b.stored(t, "whole"), (pgqueue.QueueLimits{MaxRunning: 3}); fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
			t.Errorf("stored %+v: the rate left out should be gone", got)
		}
	})
	t.Run("JSON", func(t *testing.T) {
		out := cli(t, exitOK, append([]string{"queues", "limit", "api", "--rate", "3/1.5s", "--partition-by", "args.a,args.b", "--json"}, db...)...)
		want := `{"queue":"api","limits":{"max_running":0,"max_running_per_key":0,` +
			`"rate":{"limit":3,"period":"1.5s","period_ms":1500,"per_key":false},` +
			`"partition_by":{"kind":false,"args_fields":["a","b"]},"sequence_continue":false}}`
		if got := compact(t, json.RawMessage(out)); got != want {
			t.Errorf("JSON\n%s\nwant\n%s", got, want)
		}
	})
	t.Run("Clear", func(t *testing.T) {
		cli(t, exitOK, append([]string{"queues", "limit", "gone", "--max-running", "5", "--partition-by", "kind"}, db...)...)
		out := cli(t, exitOK, append([]string{"queues", "limit", "gone", "--clear"}, db...)...)
		contains(t, out, "removed the limits of queue gone", "max running:          none", "rate:                 none")
		if got := b.stored(t, "gone"); !got.IsZero() {
			t.Errorf("after --clear: %+v", got)
		}
	})
	t.Run("ListShowsThem", func(t *testing.T) {
		cli(t, exitOK, append([]string{"queues", "limit", "listed", "--max-running", "4", "--max-running-per-key", "1",
			"--rate", "2/1h", "--partition-by", "args.customer_id"}, db...)...)
		out := cli(t, exitOK, "queues", "list", "--database-url", b.readOnly)
		contains(t, out, "LIMITS", "max=4 key-max=1 rate=2/1h by=args.customer_id",
			"max=40 key-max=2 key-rate=100/1m by=kind,args.customer_id seq=continue")
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "gone ") && !strings.HasSuffix(line, " -") {
				t.Errorf("a queue without limits: %q, want -", line)
			}
		}
		out = cli(t, exitOK, "queues", "list", "--json", "--database-url", b.readOnly)
		var qs []queueJSON
		must(t, json.Unmarshal([]byte(out), &qs))
		for _, q := range qs {
			if q.Name == "listed" && (q.Limits.MaxRunning != 4 || q.Limits.Rate == nil || q.Limits.Rate.Period != "1h" ||
				strings.Join(q.Limits.PartitionBy.ArgsFields, ",") != "customer_id") {
				t.Errorf("listed: %+v", q.Limits)
			}
			if q.Name == "gone" && (q.Limits.Rate != nil || q.Limits.PartitionBy.ArgsFields == nil) {
				t.Errorf("gone: %+v, want no rate and an empty args_fields list", q.Limits)
			}
		}
	})
	t.Run("InvalidName", func(t *testing.T) {
		out := cli(t, exitError, append([]string{"queues", "limit", "Bad Name", "--max-running", "1"}, db...)...)
		contains(t, out, "pgqueue queues:", "invalid")
		cli(t, exitError, append([]string{"queues", "limits", "Bad Name"}, db...)...)
	})
	t.Run("RefusedReadOnly", func(t *testing.T) {
		out := cli(t, exitError, "queues", "limit", "billing", "--max-running", "1", "--database-url", b.readOnly)
		contains(t, out, "read-only")
	})
}

// TestQueuesLimitsHeld sets limits through the CLI, runs a client that
// obeys them, and reads the held-back counts on a read-only connection.
func TestQueuesLimitsHeld(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "the CLI's queue limits held by running jobs")
	b := setupLimits(t)
	ctx := t.Context()
	cli(t, exitOK, "queues", "limit", "flow", "--max-running-per-key", "1", "--partition-by", "args.customer", "--database-url", b.url)

	var ids []int64
	for _, c := range []string{"a", "a", "a", "b", "s", "s"} {
		res, err := b.client.Enqueue(ctx, limitsJob{Customer: c}, &pgqueue.EnqueueOpts{Queue: "flow"})
		must(t, err)
		ids = append(ids, res.ID)
	}
	// The last two are one sequence (EnqueueOpts has no SequenceKey yet).
	_, err := b.pool.Exec(ctx, `UPDATE pgqueue.jobs SET sequence_key = 'seq' WHERE id = ANY ($1)`, ids[4:])
	must(t, err)

	started := make(chan int64, len(ids))
	workers := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[limitsJob]) error {
		started <- job.ID
		<-ctx.Done()
		return context.Cause(ctx)
	}, nil))
	worker, err := pgqueue.New(b.pool, &pgqueue.Config{Workers: workers,
		Queues: map[string]pgqueue.QueueConfig{"flow": {MaxWorkers: 10}}})
	must(t, err)
	must(t, worker.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = worker.Stop(stopCtx)
	})
	// One job of each key runs: a, b and the sequence's first.
	for range 3 {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the limited queue's jobs did not start")
		}
	}

	out := cli(t, exitOK, "queues", "limits", "flow", "--json", "--database-url", b.readOnly)
	var res queueLimitsJSON
	must(t, json.Unmarshal([]byte(out), &res))
	want := heldJSON{InSequence: 1, ByKeyLimit: 2, Running: 3, KeysAtLimit: 3}
	if res.Queue != "flow" || res.Limits.MaxRunningPerKey != 1 || res.Held == nil || *res.Held != want {
		t.Fatalf("limits --json: %s\nwant held %+v", out, want)
	}
	out = cli(t, exitOK, "queues", "limits", "flow", "--database-url", b.readOnly)
	contains(t, out, "queue:", "flow", "max running per key:", "partition by:", "args.customer",
		"running:", "keys at max running:", "in a sequence:", "key at max running:", "key used its rate:", "ready:")
	for _, row := range [][2]string{{"running:", "3"}, {"available jobs:", "3"}, {"keys at max running:", "3"}, {"in a sequence:", "1"},
		{"key at max running:", "2"}, {"key used its rate:", "0"}, {"ready:", "0"}} {
		if !hasRow(out, row[0], row[1]) {
			t.Errorf("no row %q %q in\n%s", row[0], row[1], out)
		}
	}
	select {
	case id := <-started:
		t.Fatalf("job %d started past the limit", id)
	default:
	}

	// A queue nobody limited: no limits, every job ready.
	_, err = b.client.Enqueue(ctx, limitsJob{Customer: "x"}, &pgqueue.EnqueueOpts{Queue: "plain"})
	must(t, err)
	out = cli(t, exitOK, "queues", "limits", "plain", "--json", "--database-url", b.readOnly)
	res = queueLimitsJSON{}
	must(t, json.Unmarshal([]byte(out), &res))
	if res.Limits.MaxRunning != 0 || res.Limits.Rate != nil || res.Held == nil || *res.Held != (heldJSON{Ready: 1}) {
		t.Errorf("plain queue: %s", out)
	}
}

// hasRow reports whether out has a line whose fields start with label's
// words followed by value.
func hasRow(out, label, value string) bool {
	want := strings.Join(append(strings.Fields(label), value), " ")
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); strings.HasPrefix(strings.Join(f, " ")+" ", want+" ") {
			return true
		}
	}
	return false
}

func TestQueuesLimitUsage(t *testing.T) {
	t.Parallel()
	const url = "postgres://unused"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"queues", "limit", "q"}, "or --clear to remove them"},
		{[]string{"queues", "limit", "--max-running", "1"}, "limit takes one queue name"},
		{[]string{"queues", "limit", "a", "b", "--max-running", "1"}, "limit takes one queue name"},
		{[]string{"queues", "limit", "q", "--clear", "--max-running", "1"}, "give it alone"},
		{[]string{"queues", "limit", "q", "--max-running", "0"}, "--max-running must be at least 1"},
		{[]string{"queues", "limit", "q", "--max-running", "-3"}, "--max-running must be at least 1"},
		{[]string{"queues", "limit", "q", "--max-running", "many"}, "invalid value"},
		{[]string{"queues", "limit", "q", "--max-running-per-key", "0"}, "--max-running-per-key must be at least 1"},
		{[]string{"queues", "limit", "q", "--rate", "100"}, "not LIMIT/PERIOD"},
		{[]string{"queues", "limit", "q", "--rate", "0/1m"}, "at least 1"},
		{[]string{"queues", "limit", "q", "--rate", "5/1us"}, "under a millisecond"},
		{[]string{"queues", "limit", "q", "--rate", "5/week"}, "not a duration"},
		{[]string{"queues", "limit", "q", "--rate-per-key"}, "--rate-per-key needs --rate"},
		{[]string{"queues", "limit", "q", "--partition-by", "customer_id"}, "neither kind nor args.FIELD"},
		{[]string{"queues", "limit", "q", "--partition-by", "args.a,args.b,args.c,args.d,args.e"}, "at most 4"},
		{[]string{"queues", "limits"}, "limits takes one queue name"},
		{[]string{"queues", "limits", "q", "--max-running", "1"}, "flag provided but not defined"},
		{[]string{"queues", "frob"}, "want list, pause, resume, limit or limits"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			contains(t, cli(t, exitUsage, append(tt.args, "--database-url", url)...), tt.want)
		})
	}
	contains(t, cli(t, exitOK, "help", "queues"), "--max-running-per-key N", "--clear", "flow-control.md")
}
