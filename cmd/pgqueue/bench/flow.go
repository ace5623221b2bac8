package bench

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/limitspec"
)

// FlowResult is a limit or sequence run (Flow): its burn-down by child
// processes, the best the limits allow, and what the database says they
// kept.
type FlowResult struct {
	// Enqueue is the insert of the backlog; Result the timed run.
	Enqueue, Result Result
	// Limits are the queue's limits during the run.
	Limits pgqueue.QueueLimits
	// Ideal is the most jobs per second the run could work: the slots
	// (workers, MaxRunning, keys × MaxRunningPerKey, sequences) over the
	// job duration, and at most the rate. Zero without a job duration.
	Ideal float64
	// Finished and Span are the jobs finished and the time from the first
	// start to the last result, by the database: the throughput without
	// the clients' start-up and stop, which Result's includes.
	Finished int64
	Span     time.Duration
	// PeakRunning and PeakPerKey are the most jobs that held a lease at
	// once, of the queue and of one partition key, by the database.
	// Without limits clients claim ahead of their workers, so more than
	// the workers can hold one.
	PeakRunning, PeakPerKey int64
	// With a rate: MaxStarts is the most starts within any window of the
	// rate's period, and PeriodStarts the starts in each whole period
	// from the first start on, by the database.
	MaxStarts    int
	PeriodStarts []int
	// With sequences: how many of their jobs completed, how many were
	// claimed out of their sequence's order (by their fences, or claimed
	// twice), and how many sequences there were.
	SeqCompleted, OutOfOrder, Sequences int64
}

// JobsPerSecond is the run's throughput by the database: Finished over
// Span.
func (r FlowResult) JobsPerSecond() float64 {
	if r.Span <= 0 {
		return 0
	}
	return float64(r.Finished) / r.Span.Seconds()
}

// Ratio is the run's throughput by the database over its ideal; with a
// queue rate, the mean starts per whole period over the rate. Zero when
// there is none.
func (r FlowResult) Ratio() float64 {
	if rate := r.Limits.Rate; rate.Limit > 0 && !rate.PerKey {
		return r.MeanPeriodStarts() / float64(rate.Limit)
	}
	if r.Ideal <= 0 {
		return 0
	}
	return r.JobsPerSecond() / r.Ideal
}

// MeanPeriodStarts is the mean of PeriodStarts.
func (r FlowResult) MeanPeriodStarts() float64 {
	if len(r.PeriodStarts) == 0 {
		return 0
	}
	sum := 0
	for _, n := range r.PeriodStarts {
		sum += n
	}
	return float64(sum) / float64(len(r.PeriodStarts))
}

// Report is the run's lines after its Result: the ideal, the peaks, the
// rate and the sequences' order.
func (r FlowResult) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "           by the database: %d jobs in %.3fs from the first start to the last result = %.0f jobs/s",
		r.Finished, r.Span.Seconds(), r.JobsPerSecond())
	switch {
	case r.Limits.Rate.Limit > 0 && !r.Limits.Rate.PerKey:
		b.WriteString("; ideal: the rate, below")
	case r.Ideal > 0:
		fmt.Fprintf(&b, "; ideal %.0f jobs/s: ratio %.2f", r.Ideal, r.Ratio())
	default:
		b.WriteString("; ideal unknown (no job duration)")
	}
	b.WriteString("\n          ")
	fmt.Fprintf(&b, " peak running %d", r.PeakRunning)
	if r.Limits.MaxRunning > 0 {
		fmt.Fprintf(&b, " (limit %d)", r.Limits.MaxRunning)
	}
	if r.PeakPerKey > 0 {
		fmt.Fprintf(&b, ", per key %d", r.PeakPerKey)
		if r.Limits.MaxRunningPerKey > 0 {
			fmt.Fprintf(&b, " (limit %d)", r.Limits.MaxRunningPerKey)
		}
	}
	b.WriteString(" (database)")
	if rate := r.Limits.Rate; rate.Limit > 0 {
		fmt.Fprintf(&b, "\n           rate %s: at most %d starts in any %s window (database)", limitspec.FormatRate(rate.Limit, rate.Period),
			r.MaxStarts, limitspec.FormatPeriod(rate.Period))
		if len(r.PeriodStarts) == 0 {
			b.WriteString("; no whole period (run longer than the period)")
		} else {
			fmt.Fprintf(&b, "; per period %v, mean %.1f = %.2f of the rate", r.PeriodStarts, r.MeanPeriodStarts(),
				r.MeanPeriodStarts()/float64(rate.Limit))
		}
	}
	if r.Sequences > 0 {
		order := "order kept"
		if r.OutOfOrder > 0 {
			order = fmt.Sprintf("ORDER BROKEN: %d jobs claimed out of order (or twice)", r.OutOfOrder)
		}
		fmt.Fprintf(&b, "\n           %d sequences, %d jobs completed: %s", r.Sequences, r.SeqCompleted, order)
	}
	return b.String()
}

// Flow is one limit or sequence run: it empties the schema, gives the bench
// queue limits (the zero QueueLimits for none), enqueues cfg.Jobs jobs
// over cfg.Keys partition keys and cfg.Sequences sequences, works them
// with cfg.Processes child processes of cfg.Workers workers whose jobs
// each take cfg.JobDuration, until every job is done or cfg.StopAfter
// passed, and then reads from the jobs what the limits kept.
func Flow(ctx context.Context, cfg *Config, limits pgqueue.QueueLimits, command ChildCommand) (FlowResult, error) {
	r := FlowResult{Limits: limits}
	if err := Prepare(ctx, cfg); err != nil {
		return r, err
	}
	client, err := pgqueue.New(cfg.Pool, &pgqueue.Config{Schema: cfg.schema(), Logger: quietLogger()})
	if err != nil {
		return r, err
	}
	if err := client.QueueSetLimits(ctx, queue, limits); err != nil {
		return r, err
	}
	if r.Enqueue, err = Enqueue(ctx, cfg); err != nil {
		return r, err
	}
	if r.Result, err = BurnDownProcesses(ctx, cfg, command); err != nil {
		return r, err
	}
	r.Ideal = idealRate(cfg, limits)
	q, err := cfg.queries()
	if err != nil {
		return r, err
	}
	var span float64
	if err := cfg.Pool.QueryRow(ctx, q.flowSpan, queue).Scan(&r.Finished, &span); err != nil {
		return r, fmt.Errorf("span: %w", err)
	}
	r.Span = time.Duration(span * float64(time.Second))
	if err := cfg.Pool.QueryRow(ctx, q.flowPeakRunning, queue).Scan(&r.PeakRunning, &r.PeakPerKey); err != nil {
		return r, fmt.Errorf("peak running: %w", err)
	}
	if limits.Rate.Limit > 0 {
		rows, err := cfg.Pool.Query(ctx, q.flowStarts, queue)
		if err != nil {
			return r, fmt.Errorf("starts: %w", err)
		}
		var starts []time.Time
		for rows.Next() {
			var at time.Time
			if err := rows.Scan(&at); err != nil {
				rows.Close()
				return r, err
			}
			starts = append(starts, at)
		}
		if err := rows.Err(); err != nil {
			return r, fmt.Errorf("starts: %w", err)
		}
		r.MaxStarts, r.PeriodStarts = windowStarts(starts, limits.Rate.Period)
	}
	if cfg.Sequences > 0 {
		if err := cfg.Pool.QueryRow(ctx, q.sequenceOrder, queue).Scan(&r.SeqCompleted, &r.OutOfOrder, &r.Sequences); err != nil {
			return r, fmt.Errorf("sequence order: %w", err)
		}
	}
	return r, nil
}

// idealRate is the most jobs per second cfg's run could work under limits:
// the jobs that can run at once over the job duration, and at most the
// rate.
func idealRate(cfg *Config, l pgqueue.QueueLimits) float64 {
	if cfg.JobDuration <= 0 {
		return 0
	}
	slots := max(cfg.Processes, 1) * cfg.Workers
	if l.MaxRunning > 0 {
		slots = min(slots, l.MaxRunning)
	}
	if l.MaxRunningPerKey > 0 && cfg.Keys > 0 {
		slots = min(slots, l.MaxRunningPerKey*cfg.Keys)
	}
	if cfg.Sequences > 0 {
		slots = min(slots, cfg.Sequences)
	}
	ideal := float64(slots) / cfg.JobDuration.Seconds()
	if l.Rate.Limit > 0 && !l.Rate.PerKey {
		ideal = math.Min(ideal, float64(l.Rate.Limit)/l.Rate.Period.Seconds())
	}
	return ideal
}

// windowStarts reads sorted start instants: the most of them within any
// window of length period (a start at t and one at t+period are in
// different windows: the limit counts starts after at - period), and the
// starts in each whole period from the first on. A period is whole when a
// start came after its end: the run lasted past it.
func windowStarts(starts []time.Time, period time.Duration) (maxIn int, perPeriod []int) {
	lo := 0
	for hi := range starts {
		for !starts[lo].After(starts[hi].Add(-period)) {
			lo++
		}
		maxIn = max(maxIn, hi-lo+1)
	}
	if len(starts) == 0 {
		return 0, nil
	}
	first := starts[0]
	whole := int(starts[len(starts)-1].Sub(first) / period)
	perPeriod = make([]int, whole)
	for _, at := range starts {
		if i := int(at.Sub(first) / period); i < whole {
			perPeriod[i]++
		}
	}
	return maxIn, perPeriod
}
