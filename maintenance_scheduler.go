package pgqueue

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/jobsql"
)

// scheduler makes due scheduled jobs available (sql/schedule.sql, which
// also notifies their queues) and wakes the local producers of those
// queues. It runs on the maintenance leader.
type scheduler struct {
	pool *pgxpool.Pool
	q    *jobsql.Queries
	log  *slog.Logger
	// base is the parent of its writes, detached from Stop.
	base     context.Context
	channel  string
	interval time.Duration
	// wake tells the local producer of a queue that jobs wait.
	wake func(queue string)
}

// scheduleBatch is the most jobs one statement makes available.
const scheduleBatch = 1000

// run schedules every interval until ctx (the term) ends.
func (s *scheduler) run(ctx context.Context) {
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	for {
		for {
			queues, n, err := s.scheduleDue(scheduleBatch)
			if err != nil {
				s.log.Error("pgqueue: scheduler failed", "err", err)
				break
			}
			for q := range queues {
				s.wake(q)
			}
			if n < scheduleBatch || ctx.Err() != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// scheduleDue makes up to limit due jobs available and returns their
// queues and how many it moved.
func (s *scheduler) scheduleDue(limit int) (queues map[string]struct{}, n int, err error) {
	ctx, cancel := context.WithTimeout(s.base, jobsql.WriteTimeout)
	defer cancel()
	queues = map[string]struct{}{}
	rows, err := s.pool.Query(ctx, s.q.Schedule, limit, s.channel)
	if err != nil {
		return queues, 0, dbError("schedule", err)
	}
	defer rows.Close()
	for rows.Next() {
		var q string
		var moved int
		if err := rows.Scan(&q, &moved, nil); err != nil {
			return queues, n, dbError("schedule", err)
		}
		n += moved
		queues[q] = struct{}{}
	}
	return queues, n, dbError("schedule", rows.Err())
}
