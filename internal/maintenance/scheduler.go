package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/internal/schemawatch"
)

// Scheduler makes due scheduled jobs available and sweeps open gates
// (releases the children a flow-limited queue's claims cannot take from a
// gate, deletes drained gates), both in sql/schedule.sql, which also
// notifies their queues, and wakes the local producers of those queues.
// It runs on the maintenance leader.
type Scheduler struct {
	Pool *pgxpool.Pool
	Q    *jobsql.Queries
	Log  *slog.Logger
	// Base is the parent of its writes, detached from Stop.
	Base context.Context
	// Channel is the NOTIFY channel of the schema's inserts.
	Channel string
	// Interval is the time between two rounds.
	Interval time.Duration
	// Wake tells the local producer of a queue that jobs wait.
	Wake func(queue string)
	// Watch holds its rounds back while the schema is outdated; nil for
	// none.
	Watch *schemawatch.Watch
}

// scheduleBatch is the most jobs one statement makes available.
const scheduleBatch = 1000

// Run schedules every interval until ctx (the term) ends.
func (s *Scheduler) Run(ctx context.Context) {
	tick := time.NewTicker(s.Interval)
	defer tick.Stop()
	r := newRounds(s.Watch, s.Log, "scheduler")
	for {
		for !r.held() {
			queues, n, err := s.scheduleDue(scheduleBatch)
			if r.done(ctx, err) {
				break
			}
			for q := range queues {
				s.Wake(q)
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

// scheduleDue runs sql/schedule.sql: makes up to limit due jobs (and up
// to limit children of open gates in limited queues) available, and
// returns their queues and how many it moved.
func (s *Scheduler) scheduleDue(limit int) (queues map[string]struct{}, n int, err error) {
	ctx, cancel := context.WithTimeout(s.Base, jobsql.WriteTimeout)
	defer cancel()
	queues = map[string]struct{}{}
	rows, err := s.Pool.Query(ctx, s.Q.Schedule, limit, s.Channel)
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
