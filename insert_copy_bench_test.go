package pgqueue_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

// BenchmarkCopyEncoder compares EnqueueMany's COPY through the
// hand-written binary encoder with pgx's CopyFrom, b.N jobs in one call:
// ns/op and allocs/op are per job, cpu-ns/job is the process's CPU
// (user+system) per job and, when the server runs on this machine,
// server-ns/job is the CPU its backend spent on the call (schedstat).
// Run each variant in its own process, alternating:
//
//	go test -c -o /tmp/pgq.test . && for r in 1 2 3 4 5; do for v in hand pgx; do
//	  /tmp/pgq.test -test.run '^$' -test.bench "CopyEncoder/$v/" -test.benchtime 100000x -test.benchmem; done; done
func BenchmarkCopyEncoder(b *testing.B) {
	for _, v := range []struct {
		name   string
		viaPgx bool
	}{{"hand", false}, {"pgx", true}} {
		for _, shape := range []string{"plain", "full"} {
			b.Run(v.name+"/"+shape, func(b *testing.B) {
				ctx := context.Background()
				// One connection: the backend whose CPU is read is the one
				// that runs the COPY.
				pool := poolWithMode(b, pgtest.DB().NewDatabase(b), pgx.QueryExecModeCacheStatement, func(c *pgxpool.Config) { c.MaxConns = 1 })
				c := newClient(b, pool, nil)
				var pid int
				must(b, pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
				params := copyBenchJobs(b.N, shape)
				cpu, server := copyBenchCPU(b), backendCPU(pid)
				b.ResetTimer()
				n, err := pgqueue.EnqueueManyCopy(ctx, c, params, v.viaPgx)
				b.StopTimer()
				if err != nil || n != int64(b.N) {
					b.Fatalf("inserted %d of %d: %v", n, b.N, err)
				}
				b.ReportMetric(float64(copyBenchCPU(b)-cpu)/float64(b.N), "cpu-ns/job")
				if server >= 0 {
					b.ReportMetric(float64(backendCPU(pid)-server)/float64(b.N), "server-ns/job")
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
			})
		}
	}
}

// BenchmarkCopyEncoderAlternating runs both COPY encoders in one process,
// one round per iteration: 100,000 jobs through each, the order swapped
// every round, into a table emptied before each run. It reports, per
// shape, the median over rounds of pgx's figure over the hand-written
// one's for wall time, client CPU and server CPU (the ratios), and each
// variant's median client CPU per job. Run it with -benchtime 10x for ten
// rounds.
func BenchmarkCopyEncoderAlternating(b *testing.B) {
	const jobs = 100_000
	ctx := context.Background()
	pool := poolWithMode(b, pgtest.DB().NewDatabase(b), pgx.QueryExecModeCacheStatement, func(c *pgxpool.Config) { c.MaxConns = 1 })
	c := newClient(b, pool, nil)
	var pid int
	must(b, pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
	type sample struct{ wall, cpu, server float64 } // per job, ns
	samples := map[string][]sample{}
	run := func(shape string, viaPgx bool) sample {
		_, err := pool.Exec(ctx, "TRUNCATE pgqueue.jobs")
		must(b, err)
		params := copyBenchJobs(jobs, shape)
		start, cpu, server := time.Now(), copyBenchCPU(b), backendCPU(pid)
		n, err := pgqueue.EnqueueManyCopy(ctx, c, params, viaPgx)
		if err != nil || n != jobs {
			b.Fatalf("inserted %d of %d: %v", n, jobs, err)
		}
		return sample{
			wall:   float64(time.Since(start)) / jobs,
			cpu:    float64(copyBenchCPU(b)-cpu) / jobs,
			server: float64(backendCPU(pid)-server) / jobs,
		}
	}
	round := 0
	for b.Loop() {
		for _, shape := range []string{"plain", "full"} {
			first := round%2 == 0
			s1 := run(shape, !first)
			s2 := run(shape, first)
			hand, viaPgx := s1, s2
			if !first {
				hand, viaPgx = s2, s1
			}
			samples[shape+"/hand"] = append(samples[shape+"/hand"], hand)
			samples[shape+"/pgx"] = append(samples[shape+"/pgx"], viaPgx)
		}
		round++
	}
	median := func(xs []float64) float64 {
		slices.Sort(xs)
		return (xs[(len(xs)-1)/2] + xs[len(xs)/2]) / 2
	}
	for _, shape := range []string{"plain", "full"} {
		hand, viaPgx := samples[shape+"/hand"], samples[shape+"/pgx"]
		var wall, cpu, server, handCPU, pgxCPU []float64
		for i := range hand {
			wall = append(wall, viaPgx[i].wall/hand[i].wall)
			cpu = append(cpu, viaPgx[i].cpu/hand[i].cpu)
			server = append(server, viaPgx[i].server/hand[i].server)
			handCPU, pgxCPU = append(handCPU, hand[i].cpu), append(pgxCPU, viaPgx[i].cpu)
		}
		b.ReportMetric(median(wall), shape+"-pgx/hand-wall")
		b.ReportMetric(median(cpu), shape+"-pgx/hand-cpu")
		if hand[0].server >= 0 {
			b.ReportMetric(median(server), shape+"-pgx/hand-server")
		}
		b.ReportMetric(median(handCPU), shape+"-hand-cpu-ns/job")
		b.ReportMetric(median(pgxCPU), shape+"-pgx-cpu-ns/job")
		for i := range hand {
			b.Logf("%s round %d: hand wall %.0f cpu %.0f server %.0f ns/job; pgx wall %.0f cpu %.0f server %.0f ns/job",
				shape, i, hand[i].wall, hand[i].cpu, hand[i].server, viaPgx[i].wall, viaPgx[i].cpu, viaPgx[i].server)
		}
	}
}

// copyBenchJobs are n jobs: "plain" ones with default options, or "full"
// ones with tags, meta and a singleton key, one in ten scheduled.
func copyBenchJobs(n int, shape string) []pgqueue.EnqueueManyParams {
	params := make([]pgqueue.EnqueueManyParams, n)
	full := &pgqueue.EnqueueOpts{Queue: "mail", Priority: 2, Tags: []string{"signup", "eu"}, Meta: map[string]any{"source": "web"}}
	for i := range params {
		if shape == "plain" {
			params[i] = pgqueue.EnqueueManyParams{Args: noteArgs{N: i}}
			continue
		}
		opts := full
		if i%10 == 0 {
			o := *full
			o.RunAt, o.SingletonKey = time.Now().Add(time.Hour), fmt.Sprint("key-", i)
			opts = &o
		}
		params[i] = pgqueue.EnqueueManyParams{Args: emailArgs{To: fmt.Sprintf("user%d@example.com", i)}, Opts: opts}
	}
	return params
}

// copyBenchCPU is the CPU time, user and system, the process used so far.
func copyBenchCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// backendCPU is the CPU time a server process on this machine has spent,
// from /proc/<pid>/schedstat, or -1 if it cannot be read (a server
// elsewhere).
func backendCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return -1
	}
	ns, err := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
	if err != nil {
		return -1
	}
	return time.Duration(ns)
}
