package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgqueue/pgqueue"
)

// IntervalStats is one interval (Config.Interval) of a sustained run, by
// when the jobs started and the claims ended.
type IntervalStats struct {
	// From is the interval's start, from the run's.
	From time.Duration
	// Jobs is how many jobs started in it, and P50, P99 and Max their
	// enqueue→start latency.
	Jobs          int
	P50, P99, Max time.Duration
	// Claims is how many claim statements ended in it (those that found
	// nothing included), and ClaimP50, ClaimP99 and ClaimMax their time,
	// from sending the statement to reading its last row.
	Claims                       int
	ClaimP50, ClaimP99, ClaimMax time.Duration
}

// TableState is the jobs table at one moment.
type TableState struct {
	// FetchIndex is the bytes of jobs_fetch_idx, the partial index on
	// available jobs that every claim reads; Heap and Indexes are the
	// table's and all its indexes'.
	FetchIndex, Heap, Indexes int64
	// Live and Dead rows, autovacuum and autoanalyze runs so far, and rows
	// deleted since the server started, by the statistics.
	Live, Dead, Autovacuums, Autoanalyzes, Deleted int64
}

func (t TableState) String() string {
	return fmt.Sprintf("fetch index %s, heap %s, all indexes %s; %d live and %d dead rows; autovacuum %d, autoanalyze %d so far",
		kib(t.FetchIndex), mib(t.Heap), mib(t.Indexes), t.Live, t.Dead, t.Autovacuums, t.Autoanalyzes)
}

func kib(b int64) string { return fmt.Sprintf("%d kB", b/1024) }

// readTable reads the jobs table's state.
func readTable(ctx context.Context, cfg *Config) (TableState, error) {
	q, err := cfg.queries()
	if err != nil {
		return TableState{}, err
	}
	var t TableState
	err = cfg.Pool.QueryRow(ctx, q.tableState).Scan(&t.FetchIndex, &t.Heap, &t.Indexes, &t.Live, &t.Dead, &t.Autovacuums, &t.Autoanalyzes, &t.Deleted)
	if err != nil {
		return t, fmt.Errorf("table state: %w", err)
	}
	return t, nil
}

// durationLog keeps durations by the interval of the run they ended in.
type durationLog struct {
	start time.Time
	width time.Duration
	mu    sync.Mutex
	by    [][]time.Duration
}

func newDurationLog(start time.Time, width time.Duration) *durationLog {
	return &durationLog{start: start, width: width}
}

func (l *durationLog) add(at time.Time, d time.Duration) {
	i := max(int(at.Sub(l.start)/l.width), 0)
	l.mu.Lock()
	for len(l.by) <= i {
		l.by = append(l.by, nil)
	}
	l.by[i] = append(l.by[i], d)
	l.mu.Unlock()
}

// claimLog is the claims' durations, by interval.
type claimLog = durationLog

// intervals returns the sorted durations of each interval, and of all.
func (l *durationLog) intervals() (by [][]time.Duration, all []time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	by = make([][]time.Duration, len(l.by))
	for i, ds := range l.by {
		by[i] = slices.Clone(ds)
		slices.Sort(by[i])
		all = append(all, ds...)
	}
	slices.Sort(all)
	return by, all
}

// quantile is the q-quantile of sorted ds (nearest rank); 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(q*float64(len(ds))+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// Sustained offers cfg.Rate jobs per second for cfg.Duration, in small
// batches every 10 ms, to a client working them with cfg.Workers, then
// waits for the last of them. Each job's enqueue→start latency is
// attempted_at − created_at of the row the handler got (both by the
// database clock), so pruned jobs count too; claims are timed by the
// client's pool. Both are also reported by Config.Interval.
func Sustained(ctx context.Context, cfg *Config) (Result, error) {
	width := cfg.Interval
	if width <= 0 {
		width = time.Minute
	}
	before, err := readTable(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	m, err := newMeter(ctx, cfg, runApp(), true)
	if err != nil {
		return Result{}, err
	}
	defer m.close()
	var worked atomic.Int64
	var latency, latencySeconds *durationLog // set before Start, read after Stop
	client, err := noopClient(cfg, m, func(job *pgqueue.Job[noopArgs]) {
		now, d := time.Now(), job.AttemptedAt.Sub(job.CreatedAt)
		latency.add(now, d)
		latencySeconds.add(now, d)
		worked.Add(1)
	})
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	latency, latencySeconds = newDurationLog(start, width), newDurationLog(start, time.Second)
	m.tracer.claims, m.tracer.claimSeconds = newDurationLog(start, width), newDurationLog(start, time.Second)
	beside, err := watchActivity(ctx, cfg, start)
	if err != nil {
		return Result{}, err
	}
	defer beside.stop()
	if err := m.start(ctx); err != nil {
		return Result{}, err
	}
	if err := client.Start(ctx); err != nil {
		return Result{}, err
	}
	stopProgress := progress(cfg, "sustained", worked.Load, 0)

	const tick = 10 * time.Millisecond
	opts := &pgqueue.EnqueueOpts{Queue: queue}
	var offered int64
	ticker := time.NewTicker(tick)
	var insertErr error
	for time.Since(start) < cfg.Duration && ctx.Err() == nil && insertErr == nil {
		<-ticker.C
		// What the rate owes by now: a slow insert is caught up with, not
		// silently dropped from the offered load.
		n := int(float64(cfg.Rate)*time.Since(start).Seconds()) - int(offered)
		if n <= 0 {
			continue
		}
		params := make([]pgqueue.EnqueueManyParams, n)
		for i := range params {
			params[i] = pgqueue.EnqueueManyParams{Args: noopArgs{N: int(offered) + i}, Opts: opts}
		}
		_, insertErr = client.EnqueueMany(ctx, params)
		offered += int64(n)
	}
	ticker.Stop()
	elapsed := time.Since(start)
	for worked.Load() < offered && ctx.Err() == nil && insertErr == nil {
		time.Sleep(10 * time.Millisecond)
	}
	stopErr := client.Stop(context.WithoutCancel(ctx))
	usage := m.stop(ctx)
	stopProgress()
	if insertErr != nil {
		return Result{}, fmt.Errorf("sustained: enqueue: %w", insertErr)
	}
	if stopErr != nil {
		return Result{}, stopErr
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	res := Result{Mode: "sustained", Jobs: worked.Load(), Offered: offered, Elapsed: elapsed, Usage: usage, Before: before}
	if res.After, err = readTable(ctx, cfg); err != nil {
		return res, err
	}
	lat, all := latency.intervals()
	res.P50, res.P95, res.P99 = quantile(all, 0.50), quantile(all, 0.95), quantile(all, 0.99)
	bySecond, _ := latencySeconds.intervals()
	claimSeconds, _ := m.tracer.claimSeconds.intervals()
	res.Attribution = attribute(beside, bySecond, claimSeconds)
	claims, _ := m.tracer.claims.intervals()
	for i := range max(len(lat), len(claims)) {
		s := IntervalStats{From: time.Duration(i) * width}
		if i < len(lat) {
			ds := lat[i]
			s.Jobs, s.P50, s.P99, s.Max = len(ds), quantile(ds, 0.5), quantile(ds, 0.99), quantile(ds, 1)
		}
		if i < len(claims) {
			ds := claims[i]
			s.Claims, s.ClaimP50, s.ClaimP99, s.ClaimMax = len(ds), quantile(ds, 0.5), quantile(ds, 0.99), quantile(ds, 1)
		}
		res.Intervals = append(res.Intervals, s)
	}
	return res, nil
}

// SustainedReport is the sustained run's table by interval and the
// table's state at both ends.
func SustainedReport(r Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %8s %10s %10s %10s %8s %10s %10s %10s\n", "from", "jobs", "p50", "p99", "max", "claims", "claim p50", "claim p99", "claim max")
	for _, s := range r.Intervals {
		fmt.Fprintf(&b, "%-8s %8d %10s %10s %10s %8d %10s %10s %10s\n", s.From, s.Jobs, round(s.P50), round(s.P99), round(s.Max),
			s.Claims, round(s.ClaimP50), round(s.ClaimP99), round(s.ClaimMax))
	}
	fmt.Fprintf(&b, "table before: %s\n", r.Before)
	fmt.Fprintf(&b, "table after:  %s\n", r.After)
	fmt.Fprintf(&b, "rows deleted during the run (pruner): %d\n", r.After.Deleted-r.Before.Deleted)
	b.WriteString(r.Attribution.String())
	return b.String()
}
