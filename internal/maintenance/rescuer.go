package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/internal/loop"
	"github.com/pgqueue/pgqueue/internal/schemawatch"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// RetryPolicy says how long a job waits before its next attempt: the
// method set of the root's RetryPolicy, so its values are assignable here.
type RetryPolicy interface {
	NextRetry(attempt int, err error) time.Duration
}

// Rescuer puts back running jobs whose lease expired: their worker died,
// hung or lost the database. Each gets a new fence (sql/rescue.sql), so
// from that moment every write of the old holder is refused. It runs on
// the maintenance leader.
type Rescuer struct {
	Pool *pgxpool.Pool
	Q    *jobsql.Queries
	Log  *slog.Logger
	// Rescued is told of each job rescued; nil for none.
	Rescued func(job pgqueuetype.RescuedJob)
	// ClientID names the rescuing client in the log.
	ClientID string
	// Base is the parent of its writes, detached from Stop.
	Base context.Context
	// Retry sets when a rescued job runs again, as for a failed attempt
	// whose error is ErrJobLeaseLost.
	Retry RetryPolicy
	// Interval is the time between two rounds.
	Interval time.Duration
	// BeforeWrite, a test hook, runs between the read and the write.
	BeforeWrite func(ids []int64)
	// Watch holds its rounds back while the schema is outdated; nil for
	// none.
	Watch *schemawatch.Watch
}

const rescueBatch = 1000

// Run rescues every interval until ctx (the term) ends.
func (r *Rescuer) Run(ctx context.Context) {
	rs := newRounds(r.Watch, r.Log, "rescue")
	loop.Every(ctx, r.Interval, func() {
		if rs.held() {
			return
		}
		n, err := r.rescue(rescueBatch)
		if !rs.done(ctx, err) && n > 0 {
			r.Log.InfoContext(ctx, "pgqueue: rescued jobs with expired leases", "jobs", n, "by", r.ClientID)
		}
	})
}

// rescue reads up to limit expired jobs, then puts back those still as it
// read them. Between the two steps a worker may still complete a job with
// its old fence; rescue.sql re-checks id, fence, state and expiry, so that
// completion stands.
func (r *Rescuer) rescue(limit int) (int, error) {
	ctx, cancel := context.WithTimeout(r.Base, jobsql.WriteTimeout)
	defer cancel()
	rows, err := r.Pool.Query(ctx, r.Q.RescueCandidates, limit)
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
		delays = append(delays, r.Retry.NextRetry(attempt, pgqueuetype.ErrJobLeaseLost).Microseconds())
	}
	if err := rows.Err(); err != nil {
		return 0, dbError("rescue", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if r.BeforeWrite != nil {
		r.BeforeWrite(ids)
	}
	rows, err = r.Pool.Query(ctx, r.Q.Rescue, jobsql.OneShotPlan, ids, fences, delays)
	if err != nil {
		return 0, dbError("rescue", err)
	}
	var j pgqueuetype.RescuedJob
	n, err := pgx.ForEachRow(rows, []any{&j.ID, &j.Queue, &j.Kind, &j.Holder, &j.State}, func() error {
		r.Log.WarnContext(ctx, "pgqueue: job rescued: lease expired", "job", j.ID, "kind", j.Kind, "queue", j.Queue,
			"holder", j.Holder, "by", r.ClientID, "state", j.State)
		if r.Rescued != nil {
			r.Rescued(j)
		}
		return nil
	})
	if err != nil {
		return 0, dbError("rescue", err)
	}
	return int(n.RowsAffected()), nil
}
