package pgqueue

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/internal/loop"
)

// rescuer puts back running jobs whose lease expired: their worker died,
// hung or lost the database. Each gets a new fence (sql/rescue.sql), so
// from that moment every write of the old holder is refused. It runs on
// the maintenance leader.
type rescuer struct {
	pool *pgxpool.Pool
	q    *jobsql.Queries
	log  *slog.Logger
	obs  *Observer // nil for none
	// clientID names the rescuing client in the log.
	clientID string
	// base is the parent of its writes, detached from Stop.
	base     context.Context
	retry    RetryPolicy
	interval time.Duration
	// beforeWrite, a test hook, runs between the read and the write.
	beforeWrite func(ids []int64)
}

const rescueBatch = 1000

// run rescues every interval until ctx (the term) ends.
func (r *rescuer) run(ctx context.Context) {
	loop.Every(ctx, r.interval, func() {
		n, err := r.rescue(rescueBatch)
		switch {
		case err != nil:
			r.log.ErrorContext(ctx, "pgqueue: rescue failed", "err", err)
		case n > 0:
			r.log.InfoContext(ctx, "pgqueue: rescued jobs with expired leases", "jobs", n, "by", r.clientID)
		}
	})
}

// rescue reads up to limit expired jobs, then puts back those still as it
// read them. Between the two steps a worker may still complete a job with
// its old fence; rescue.sql re-checks id, fence, state and expiry, so that
// completion stands.
func (r *rescuer) rescue(limit int) (int, error) {
	ctx, cancel := context.WithTimeout(r.base, jobsql.WriteTimeout)
	defer cancel()
	rows, err := r.pool.Query(ctx, r.q.RescueCandidates, limit)
	if err != nil {
		return 0, dbError("rescue", err)
	}
	var ids, fences, delays []int64
	for rows.Next() {
		var id, fence int64
		var attempt int
		if err := rows.Scan(&id, &fence, &attempt); err != nil {
			rows.Close()
			return 0, dbError("rescue", err)
		}
		ids = append(ids, id)
		fences = append(fences, fence)
		delays = append(delays, r.retry.NextRetry(attempt, ErrJobLeaseLost).Microseconds())
	}
	if err := rows.Err(); err != nil {
		return 0, dbError("rescue", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if r.beforeWrite != nil {
		r.beforeWrite(ids)
	}
	rows, err = r.pool.Query(ctx, r.q.Rescue, jobsql.OneShotPlan, ids, fences, delays)
	if err != nil {
		return 0, dbError("rescue", err)
	}
	var j RescuedJob
	n, err := pgx.ForEachRow(rows, []any{&j.ID, &j.Queue, &j.Kind, &j.Holder, &j.State}, func() error {
		r.log.WarnContext(ctx, "pgqueue: job rescued: lease expired", "job", j.ID, "kind", j.Kind, "queue", j.Queue,
			"holder", j.Holder, "by", r.clientID, "state", j.State)
		if r.obs != nil && r.obs.Rescued != nil {
			r.obs.Rescued(j)
		}
		return nil
	})
	if err != nil {
		return 0, dbError("rescue", err)
	}
	return int(n.RowsAffected()), nil
}
