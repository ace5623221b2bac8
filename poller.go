package pgqueue

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/internal/loop"
	"github.com/pgqueue/pgqueue/internal/maintenance"
)

// poller asks once per interval which of the client's queues have
// available jobs, and whether the maintenance leader's lease is free: the
// fallback for notifications missed or never sent, and a follower's cue
// to campaign. One query for all queues (sql/poll.sql).
type poller struct {
	pool     *pgxpool.Pool
	q        *jobsql.Queries
	log      *slog.Logger
	queues   []string
	interval time.Duration
	// wake tells the producer of a queue that jobs wait.
	wake func(queue string)
	// leaderFree tells the maintenance elector to campaign now.
	leaderFree func()
	// schema holds polls back while the schema is older than needed.
	schema *schemaWatch
}

// run polls until ctx (the client's fetch context) ends. A poll that
// keeps failing (the database down) is logged when it starts, every 30 s
// while it lasts and when it ends, not at every poll.
func (p *poller) run(ctx context.Context) {
	failures := newFailureLog(p.log, "pgqueue: poll failed", "pgqueue: poll succeeds again")
	loop.Every(ctx, p.interval, func() {
		err := p.poll(ctx)
		switch {
		case err == nil:
			failures.succeeded(ctx)
		case ctx.Err() == nil && !errors.Is(err, ErrSchemaOutdated):
			failures.failed(ctx, err)
		}
	})
}

func (p *poller) poll(ctx context.Context) error {
	if err := p.schema.blocked(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, jobsql.WriteTimeout)
	defer cancel()
	rows, err := p.pool.Query(ctx, p.q.Poll, p.queues, maintenance.Lease)
	if err != nil {
		return p.schema.observe(ctx, err)
	}
	var q *string
	_, err = pgx.ForEachRow(rows, []any{&q}, func() error {
		if q == nil {
			p.leaderFree()
		} else {
			p.wake(*q)
		}
		return nil
	})
	return p.schema.observe(ctx, err)
}
