package bench

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// RawEnqueue inserts cfg.Jobs no-op jobs with one COPY of rows prepared
// before the clock starts: the server's own ceiling for EnqueueMany, which
// must also encode and validate every job while it streams.
func RawEnqueue(ctx context.Context, cfg *Config) (Result, error) {
	q, err := cfg.queries()
	if err != nil {
		return Result{}, err
	}
	var rows bytes.Buffer
	for i := range cfg.Jobs {
		fmt.Fprintf(&rows, "%s\tbench_noop\t{\"n\":%d}\t0\t25\t{}\t{}\t\\N\n", queue, i)
	}
	start := time.Now()
	tx, err := cfg.Pool.Begin(ctx)
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	tag, err := tx.Conn().PgConn().CopyFrom(ctx, &rows, q.rawCopy)
	if err != nil {
		return Result{}, fmt.Errorf("raw enqueue: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Result{}, fmt.Errorf("raw enqueue: %w", err)
	}
	res := Result{Mode: "raw copy", Jobs: tag.RowsAffected(), Elapsed: time.Since(start)}
	return res, settle(ctx, cfg)
}

// RawBurnDown works the enqueued jobs with bare SQL: RawConns loops, each
// claiming up to Workers jobs and completing them in one statement. It is
// the ceiling the library is measured against.
func RawBurnDown(ctx context.Context, cfg *Config) (Result, error) {
	q, err := cfg.queries()
	if err != nil {
		return Result{}, err
	}
	conns := max(cfg.RawConns, 1)
	m, err := newMeter(ctx, cfg, runApp(), true)
	if err != nil {
		return Result{}, err
	}
	defer m.close()
	var done atomic.Int64
	if err := m.start(ctx); err != nil {
		return Result{}, err
	}
	stopProgress := progress(cfg, "raw burn-down", done.Load, int64(cfg.Jobs))
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				rows, err := m.pool.Query(ctx, q.rawClaim, queue, cfg.Workers)
				if err != nil {
					errs <- err
					return
				}
				var ids, fences []int64
				for rows.Next() {
					var id, fence int64
					if err := rows.Scan(&id, &fence); err != nil {
						errs <- err
						return
					}
					ids, fences = append(ids, id), append(fences, fence)
				}
				if err := rows.Err(); err != nil {
					errs <- err
					return
				}
				if len(ids) == 0 {
					return
				}
				m.claims.Add(1)
				m.claimed.Add(int64(len(ids)))
				// Planned for its arrays each time, as the library does.
				tag, err := m.pool.Exec(ctx, q.rawComplete, pgx.QueryExecModeCacheDescribe, ids, fences)
				if err != nil {
					errs <- err
					return
				}
				m.writes.Add(1)
				m.written.Add(tag.RowsAffected())
				done.Add(tag.RowsAffected())
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	usage := m.stop(ctx)
	stopProgress()
	close(errs)
	if err := <-errs; err != nil {
		return Result{}, fmt.Errorf("raw burn-down: %w", err)
	}
	return Result{Mode: "raw", Jobs: done.Load(), Elapsed: elapsed, Usage: usage}, ctx.Err()
}
