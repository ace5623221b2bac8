package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/internal/schemawatch"
)

// Scheduler makes due scheduled jobs available (sql/schedule.sql, which
// also notifies their queues), sweeps open gates (sql/gate_sweep.sql:
// releases the children a flow-limited queue's claims cannot take from a
// gate, deletes drained gates) and wakes the local producers of those
// queues. It runs on the maintenance leader.
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
			queues, n, err := s.run(s.Q.Schedule, "schedule", scheduleBatch)
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
		for !r.held() {
			queues, n, err := s.run(s.Q.GateSweep, "sweep gates", scheduleBatch)
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

// run makes up to limit jobs available with stmt (schedule.sql or
// gate_sweep.sql: both return a queue and how many jobs it got per row)
// and returns their queues and how many it moved.
func (s *Scheduler) run(stmt, what string, limit int) (queues map[string]struct{}, n int, err error) {
	ctx, cancel := context.WithTimeout(s.Base, jobsql.WriteTimeout)
	defer cancel()
	queues = map[string]struct{}{}
	rows, err := s.Pool.Query(ctx, stmt, limit, s.Channel)
	if err != nil {
		return queues, 0, dbError(what, err)
	}
	defer rows.Close()
	for rows.Next() {
		var q string
		var moved int
		if err := rows.Scan(&q, &moved, nil); err != nil {
			return queues, n, dbError(what, err)
		}
		n += moved
		queues[q] = struct{}{}
	}
	return queues, n, dbError(what, rows.Err())
}
