package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/pgqueue/pgqueue"
)

// Sustained offers cfg.Rate jobs per second for cfg.Duration, in small
// batches every 10 ms, to a client working them with cfg.Workers, then
// waits for the last of them and reads the enqueue→start latency of every
// job from the database (attempted_at − created_at, both by its clock).
func Sustained(ctx context.Context, cfg *Config) (Result, error) {
	q, err := cfg.queries()
	if err != nil {
		return Result{}, err
	}
	var worked atomic.Int64
	client, err := noopClient(cfg, func() { worked.Add(1) })
	if err != nil {
		return Result{}, err
	}
	if err := client.Start(ctx); err != nil {
		return Result{}, err
	}
	stopProgress := progress(cfg.Progress, "sustained", worked.Load, 0)

	const tick = 10 * time.Millisecond
	opts := &pgqueue.InsertOpts{Queue: queue}
	var offered int64
	start := time.Now()
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
		params := make([]pgqueue.EnqueueParams, n)
		for i := range params {
			params[i] = pgqueue.EnqueueParams{Args: noopArgs{N: int(offered) + i}, Opts: opts}
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
	stopProgress()
	if insertErr != nil {
		return Result{}, fmt.Errorf("sustained: enqueue: %w", insertErr)
	}
	if stopErr != nil {
		return Result{}, stopErr
	}
	res := Result{Mode: "sustained", Jobs: worked.Load(), Offered: offered, Elapsed: elapsed}
	var p50, p95, p99 float64
	err = cfg.Pool.QueryRow(ctx, q.latency).Scan(&p50, &p95, &p99)
	if err != nil {
		return Result{}, fmt.Errorf("sustained: latency: %w", err)
	}
	res.P50, res.P95, res.P99 = seconds(p50), seconds(p95), seconds(p99)
	return res, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
