package pgqueue

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgqueue/pgqueue/internal/enqueue"
)

// QueuePause pauses the queue name: from the commit on, no client of the
// schema claims its jobs, until QueueResume. Jobs running in it finish;
// jobs can still be enqueued into it and wait. The pause is a row in the
// schema's queues table, so it binds every client, those started later
// too, and survives restarts. Pausing a paused queue changes nothing and
// is not an error; a queue need not have jobs or be configured anywhere to
// be paused. An invalid name: ErrInvalid.
func (c *Client) QueuePause(ctx context.Context, name string) error {
	return c.queueControl(ctx, c.pool, "pause", name)
}

// QueuePauseTx is QueuePause inside the caller's transaction: the queue is
// paused when tx commits.
func (c *Client) QueuePauseTx(ctx context.Context, tx pgx.Tx, name string) error {
	return c.queueControl(ctx, tx, "pause", name)
}

// QueueResume resumes the queue name and wakes the workers of the queue at
// commit, so they claim its jobs at once. Resuming a queue that is not
// paused is not an error. An invalid name: ErrInvalid.
func (c *Client) QueueResume(ctx context.Context, name string) error {
	if err := c.queueControl(ctx, c.pool, "resume", name); err != nil {
		return err
	}
	c.wake(name)
	return nil
}

// QueueResumeTx is QueueResume inside the caller's transaction: the queue
// is resumed, and its workers woken, when tx commits.
func (c *Client) QueueResumeTx(ctx context.Context, tx pgx.Tx, name string) error {
	return c.queueControl(ctx, tx, "resume", name)
}

func (c *Client) queueControl(ctx context.Context, db interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, verb, name string) error {
	op := verb + " queue " + name
	if err := ctxError(ctx, op); err != nil {
		return err
	}
	if err := enqueue.ValidateQueue(name); err != nil {
		return err
	}
	var err error
	if verb == "pause" {
		_, err = db.Exec(ctx, c.q.QueuePause, name)
	} else {
		_, err = db.Exec(ctx, c.q.QueueResume, name, c.channel)
	}
	if err != nil {
		return dbError(op, err)
	}
	// An operator's act that changes every client's work: worth a record.
	_, inTx := db.(pgx.Tx)
	c.log.InfoContext(ctx, "pgqueue: queue "+verb+"d", "queue", name, "in_tx", inTx)
	return nil
}

// QueueInfo is a queue as QueueList sees it.
type QueueInfo struct {
	// Name is the queue's name.
	Name string
	// Paused reports whether the queue is paused (QueuePause).
	Paused bool
	// PausedAt is when the queue was paused; zero when it is not.
	PausedAt time.Time
	// UpdatedAt is when the queue was last paused or resumed; zero for a
	// queue that never was.
	UpdatedAt time.Time
	// Blocked, Scheduled, Available and Running count the queue's jobs in
	// those states, exactly, as of the call. Blocked jobs wait for the jobs
	// they depend on (see EnqueueOpts.DependsOn). Finished jobs are not
	// counted (see QueueList).
	Blocked, Scheduled, Available, Running int64
	// OldestAvailableAt is the run_at of the queue's oldest available job:
	// since when it has been waiting for a worker. Zero when none is
	// available.
	OldestAvailableAt time.Time
	// OldestAvailableAge is how long that job has waited, by the database
	// clock; zero when none is available.
	OldestAvailableAge time.Duration
	// Limits are the queue's flow limits (QueueSetLimits); zero for none.
	Limits QueueLimits
}

// QueueList returns every queue that has a blocked, scheduled, available
// or running job, or that was ever paused or resumed, in name order, with
// its pause and its job counts.
//
// The counts are exact and read only the partial indexes of those four
// states and the rows they name, so QueueList costs in proportion to the
// backlog, not to the millions of finished jobs a table may hold. That is
// why finished jobs are neither counted nor make a queue appear: see
// docs/dev/design.md, "Pausing queues".
func (c *Client) QueueList(ctx context.Context) ([]*QueueInfo, error) {
	const op = "list queues"
	if err := ctxError(ctx, op); err != nil {
		return nil, err
	}
	rows, err := c.pool.Query(ctx, c.q.QueueList)
	if err != nil {
		return nil, dbError(op, err)
	}
	var (
		q                   QueueInfo
		pausedAt, updatedAt pgtype.Timestamptz
		oldest              pgtype.Timestamptz
		ageUS               pgtype.Int8
		maxRun, maxPerKey   pgtype.Int4
		rate                pgtype.Int4
		periodUS            pgtype.Int8
		out                 []*QueueInfo
	)
	_, err = pgx.ForEachRow(rows, []any{&q.Name, &pausedAt, &updatedAt, &q.Scheduled, &q.Available, &q.Running, &oldest, &ageUS,
		&maxRun, &maxPerKey, &rate, &periodUS, &q.Limits.Rate.PerKey, &q.Limits.PartitionBy.Kind, &q.Limits.PartitionBy.ArgsFields,
		&q.Limits.SequenceContinue, &q.Blocked}, func() error {
		info := q
		info.Paused, info.PausedAt, info.UpdatedAt = pausedAt.Valid, pausedAt.Time, updatedAt.Time
		info.OldestAvailableAt = oldest.Time
		info.OldestAvailableAge = time.Duration(ageUS.Int64) * time.Microsecond
		info.Limits.MaxRunning, info.Limits.MaxRunningPerKey = int(maxRun.Int32), int(maxPerKey.Int32)
		info.Limits.Rate.Limit, info.Limits.Rate.Period = int(rate.Int32), time.Duration(periodUS.Int64)*time.Microsecond
		info.Limits.PartitionBy.ArgsFields = slices.Clip(slices.Clone(info.Limits.PartitionBy.ArgsFields))
		if len(info.Limits.PartitionBy.ArgsFields) == 0 {
			info.Limits.PartitionBy.ArgsFields = nil
		}
		out = append(out, &info)
		return nil
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	return out, nil
}
