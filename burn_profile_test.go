package pgqueue_test

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/cmd/pgqueue/bench"
)

// BenchmarkBurnDown runs the burn-down of `pgqueue bench` (EnqueueMany of
// no-op jobs, then one client with 1,000 workers works them all) once per
// iteration and reports the client's CPU (user and system, getrusage) and
// allocations per job of the working phase alone: the figures the client's
// cost is judged by (docs/dev/measurements/2026-12-02-burn-down-sustained-enqueue.md, "Client CPU per job").
//
// By default it works b.N jobs on the test server. Set
// PGQUEUE_BURN_URL to a scratch database (its schema pgqueue_bench is
// emptied) to measure on another server, PGQUEUE_BURN_JOBS to work that
// many jobs per iteration, and PGQUEUE_BURN_PROFILE to a file prefix to
// write <prefix>.cpu (the working phase's CPU profile) and <prefix>.heap0
// and <prefix>.heap1 (heap profiles before and after it: compare their
// alloc_space with go tool pprof -base).
//
//	PGQUEUE_BURN_URL=postgres://postgres@127.0.0.1:5432/scratch PGQUEUE_BURN_JOBS=300000 \
//	  go test -run '^$' -bench BurnDown -benchtime 1x .
func BenchmarkBurnDown(b *testing.B) {
	ctx := context.Background()
	var pool *pgxpool.Pool
	if url := os.Getenv("PGQUEUE_BURN_URL"); url != "" {
		cfg, err := pgxpool.ParseConfig(url)
		must(b, err)
		cfg.MaxConns = 20
		pool, err = pgxpool.NewWithConfig(ctx, cfg)
		must(b, err)
		b.Cleanup(pool.Close)
	} else {
		pool = newPool(b)
	}
	jobs := b.N
	perIteration := false
	if s := os.Getenv("PGQUEUE_BURN_JOBS"); s != "" {
		n, err := strconv.Atoi(s)
		must(b, err)
		jobs, perIteration = n, true
	}
	prefix := os.Getenv("PGQUEUE_BURN_PROFILE")
	var cpu time.Duration
	var elapsed time.Duration
	var mallocs, bytes uint64
	worked := 0
	rounds := 1
	if perIteration {
		rounds = b.N
	}
	b.ResetTimer()
	for range rounds {
		b.StopTimer()
		bc := &bench.Config{Pool: pool, Jobs: jobs, Workers: 1000}
		must(b, bench.Prepare(ctx, bc))
		_, err := bench.Enqueue(ctx, bc)
		must(b, err)
		runtime.GC()
		if prefix != "" {
			writeHeapProfile(b, prefix+".heap0")
			f, err := os.Create(prefix + ".cpu")
			must(b, err)
			must(b, pprof.StartCPUProfile(f))
			defer f.Close()
		}
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		before := processCPU(b)
		b.StartTimer()
		res, err := bench.BurnDown(ctx, bc)
		b.StopTimer()
		cpu += processCPU(b) - before
		runtime.ReadMemStats(&ms1)
		if prefix != "" {
			pprof.StopCPUProfile()
			writeHeapProfile(b, prefix+".heap1")
		}
		must(b, err)
		mallocs += ms1.Mallocs - ms0.Mallocs
		bytes += ms1.TotalAlloc - ms0.TotalAlloc
		elapsed += res.Elapsed
		worked += int(res.Jobs)
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(worked), "cpu-µs/job")
	b.ReportMetric(float64(worked)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(mallocs)/float64(worked), "allocs/job")
	b.ReportMetric(float64(bytes)/float64(worked), "B/job")
}

func writeHeapProfile(b *testing.B, name string) {
	f, err := os.Create(name)
	must(b, err)
	defer f.Close()
	must(b, pprof.Lookup("allocs").WriteTo(f, 0))
}

// processCPU is the process's CPU time so far, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	must(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
