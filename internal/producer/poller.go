package producer

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/internal/loop"
	"github.com/pgqueue/pgqueue/internal/schemawatch"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// Poller asks once per interval which of the client's queues have
// available jobs, and whether the maintenance leader's lease is free: the
// fallback for notifications missed or never sent, and a follower's cue
// to campaign. One query for all queues (sql/poll.sql).
type Poller struct {
	Pool    *pgxpool.Pool
	Queries *jobsql.Queries
	Log     *slog.Logger
	// Queues are the queues it asks about; Interval how often.
	Queues   []string
	Interval time.Duration
	// LeaderLease is the name of the maintenance leader's lease lock.
	LeaderLease string
	// Wake tells the producer of a queue that jobs wait, and how the
	// queue's flow limits bear on its claims.
	Wake func(queue string, flow Flow)
	// LeaderFree tells the maintenance elector to campaign now.
	LeaderFree func()
	// Watch holds polls back while the schema is older than needed; nil
	// for none.
	Watch *schemawatch.Watch
	// Base is the context of each poll's statement, not the fetch
	// context: a statement cancelled in flight costs its connection (pgx
	// closes it), and a TLS connection interrupted while it wrote can no
	// longer send its Terminate, so its close waits pgx's 15 s for a
	// server that never hears it, holding up the pool's Close.
	Base context.Context
}

// Run polls until ctx (the client's fetch context) ends; a poll in
// flight then finishes (see Base). A poll that
// keeps failing (the database down) is logged when it starts, every 30 s
// while it lasts and when it ends, not at every poll.
func (p *Poller) Run(ctx context.Context) {
	failures := loop.NewFailureLog(p.Log, "pgqueue: poll failed", "pgqueue: poll succeeds again")
	poll := func() {
		err := p.Poll(p.Base)
		switch {
		case err == nil:
			failures.Succeeded(ctx)
		case ctx.Err() == nil && !errors.Is(err, pgqueuetype.ErrSchemaOutdated):
			failures.Failed(ctx, err)
		}
	}
	// Once at the start: until a poll has told a producer its queue's flow
	// limits, its claims run claim.sql, which takes nothing of a limited
	// queue, and it would wait a poll interval for its first jobs.
	poll()
	loop.Every(ctx, p.Interval, poll)
}

// Poll asks once, calling Wake for each queue with jobs to claim and
// LeaderFree when the leader's lease is free. Its statement has ctx,
// bounded by jobsql.WriteTimeout.
func (p *Poller) Poll(ctx context.Context) error {
	if err := p.Watch.Blocked(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, jobsql.WriteTimeout)
	defer cancel()
	rows, err := p.Pool.Query(ctx, p.Queries.Poll, p.Queues, p.LeaderLease)
	if err != nil {
		return p.Watch.Observe(ctx, err)
	}
	var (
		q       *string
		limited bool
		gapUS   int64
		seq     bool
		wide    bool
	)
	_, err = pgx.ForEachRow(rows, []any{&q, &limited, &gapUS, &wide, &seq}, func() error {
		if q == nil {
			p.LeaderFree()
		} else {
			p.Wake(*q, Flow{Limited: limited, RateGap: time.Duration(gapUS) * time.Microsecond, Sequenced: seq, QueueWide: wide})
		}
		return nil
	})
	return p.Watch.Observe(ctx, err)
}
