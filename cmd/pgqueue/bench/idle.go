package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// IdleResult is what idle clients sent to the database.
type IdleResult struct {
	Duration     time.Duration
	PollInterval time.Duration
	// Statements each client's pool sent, the leader's (which runs the
	// scheduler and rescuer) and a follower's.
	Leader, Follower int64
}

func (r IdleResult) String() string {
	polls := r.Duration.Seconds() / r.PollInterval.Seconds()
	return fmt.Sprintf("idle %s, poll interval %s: leader %d statements (%.2f per poll interval), follower %d (%.2f per poll interval)",
		r.Duration, r.PollInterval, r.Leader, float64(r.Leader)/polls, r.Follower, float64(r.Follower)/polls)
}

// countingTracer counts the statements a pool sends.
type countingTracer struct{ n atomic.Int64 }

func (t *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.n.Add(1)
	return ctx
}

func (t *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Idle runs two clients that work three empty queues for d, the first
// started becoming the maintenance leader, and counts every statement each
// one's pool sends. The LISTEN connection sends nothing while idle.
func Idle(ctx context.Context, cfg *Config, d time.Duration) (IdleResult, error) {
	const poll = time.Second
	start := func(tracer *countingTracer) (*pgqueue.Client, *pgxpool.Pool, error) {
		pc := cfg.Pool.Config().Copy()
		pc.ConnConfig.Tracer = tracer
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return nil, nil, err
		}
		workers := pgqueue.NewWorkers()
		if err := pgqueue.AddWorkerFunc(workers, func(context.Context, *pgqueue.Job[noopArgs]) error { return nil }, nil); err != nil {
			pool.Close()
			return nil, nil, err
		}
		client, err := pgqueue.New(pool, &pgqueue.Config{
			Schema: cfg.schema(), Workers: workers, FetchPollInterval: poll, Logger: quietLogger(),
			Queues: map[string]pgqueue.QueueConfig{"a": {MaxWorkers: 10}, "b": {MaxWorkers: 10}, "c": {MaxWorkers: 10}},
		})
		if err == nil {
			err = client.Start(ctx)
		}
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		return client, pool, nil
	}
	var leader, follower countingTracer
	lc, lpool, err := start(&leader)
	if err != nil {
		return IdleResult{}, err
	}
	defer lpool.Close()
	time.Sleep(200 * time.Millisecond) // let it win the election
	fc, fpool, err := start(&follower)
	if err != nil {
		_ = lc.Stop(ctx)
		return IdleResult{}, err
	}
	defer fpool.Close()
	time.Sleep(2 * time.Second) // start-up done
	l0, f0 := leader.n.Load(), follower.n.Load()
	time.Sleep(d)
	res := IdleResult{Duration: d, PollInterval: poll, Leader: leader.n.Load() - l0, Follower: follower.n.Load() - f0}
	return res, joinErr(fc.Stop(ctx), lc.Stop(ctx))
}

func joinErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
