package pgqueue_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testlog"
)

// The benchmarks run against the test server (see internal/pgtest); run
// them with: go test -run '^$' -bench . -benchtime 20000x

func BenchmarkEnqueue(b *testing.B) {
	ctx := context.Background()
	c := newClient(b, newPool(b), nil)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := c.Enqueue(ctx, noteArgs{N: i}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEnqueueMany(b *testing.B) {
	ctx := context.Background()
	c := newClient(b, newPool(b), nil)
	params := noteParams(b.N)
	b.ResetTimer()
	if _, err := c.EnqueueMany(ctx, params); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkEnqueueManyUnique is BenchmarkEnqueueMany with every job unique
// by its args: the chunked INSERT ... ON CONFLICT path instead of COPY.
func BenchmarkEnqueueManyUnique(b *testing.B) {
	ctx := context.Background()
	c := newClient(b, newPool(b), nil)
	unique := &pgqueue.EnqueueOpts{Unique: &pgqueue.UniqueOpts{ByArgs: true}}
	params := make([]pgqueue.EnqueueManyParams, b.N)
	for i := range params {
		params[i] = pgqueue.EnqueueManyParams{Args: noteArgs{N: i}, Opts: unique}
	}
	b.ResetTimer()
	res, err := c.EnqueueMany(ctx, params)
	if err != nil || res.Enqueued != int64(b.N) {
		b.Fatal(res, err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkClaim times claim statements alone, 1,000 jobs each, as a
// producer with 1,000 free slots sends them.
func BenchmarkClaim(b *testing.B) {
	ctx := context.Background()
	c := newClient(b, newPool(b), nil)
	enqueueNotes(b, c, b.N)
	b.ResetTimer()
	claimed := 0
	for claimed < b.N {
		jobs, err := pgqueue.Claim(ctx, c, pgqueue.QueueDefault, min(1000, b.N-claimed))
		if err != nil {
			b.Fatal(err)
		}
		claimed += len(jobs)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkComplete times fenced batch completions alone, 1,000 jobs each.
func BenchmarkComplete(b *testing.B) {
	ctx := context.Background()
	c := newClient(b, newPool(b), nil)
	enqueueNotes(b, c, b.N)
	var batches [][]*pgqueue.JobRow
	for claimed := 0; claimed < b.N; {
		jobs, err := pgqueue.Claim(ctx, c, pgqueue.QueueDefault, min(1000, b.N-claimed))
		if err != nil {
			b.Fatal(err)
		}
		batches = append(batches, jobs)
		claimed += len(jobs)
	}
	b.ResetTimer()
	for _, jobs := range batches {
		n, err := pgqueue.Complete(ctx, c, jobs)
		if err != nil || n != len(jobs) {
			b.Fatalf("completed %d of %d: %v", n, len(jobs), err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

func enqueueNotes(b *testing.B, c *pgqueue.Client, n int) {
	params := noteParams(n)
	if _, err := c.EnqueueMany(context.Background(), params); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWork claims, runs (no-op) and completes b.N jobs with one client
// of 1,000 workers.
func BenchmarkWork(b *testing.B) {
	ctx := context.Background()
	pool := newPool(b)
	c := newClient(b, pool, nil)
	params := noteParams(b.N)
	if _, err := c.EnqueueMany(ctx, params); err != nil {
		b.Fatal(err)
	}
	var done atomic.Int64
	finished := make(chan struct{})
	ws := pgqueue.NewWorkers()
	must(b, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
		if done.Add(1) == int64(b.N) {
			close(finished)
		}
		return nil
	}, nil))
	worker := newClient(b, pool, &pgqueue.Config{Workers: ws, Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 1000}}, Logger: testlog.Discard()})
	b.ResetTimer()
	must(b, worker.Start(ctx))
	<-finished
	must(b, worker.Stop(ctx))
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}
