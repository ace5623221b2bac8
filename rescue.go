package pgqueue

import (
	"context"
	"time"
)

// runRescuer puts back running jobs whose lease expired: their worker died,
// hung or lost the database.
func (c *Client) runRescuer(rs *runState, ctx context.Context) {
	tick := time.NewTicker(c.config.RescueInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n, err := c.rescue(rs.base, rescueBatch)
		if err != nil {
			c.log.Error("pgqueue: rescue failed", "err", err)
			continue
		}
		if n > 0 {
			c.log.Info("pgqueue: rescued jobs with expired leases", "jobs", n)
		}
	}
}

const rescueBatch = 1000

// rescue reads up to limit expired jobs, then puts back those still as it
// read them. Between the two steps a worker may still complete a job with
// its old fence; rescue.sql re-checks id, fence, state and expiry, so that
// completion stands.
func (c *Client) rescue(base context.Context, limit int) (int, error) {
	ctx, cancel := context.WithTimeout(base, writeTimeout)
	defer cancel()
	rows, err := c.pool.Query(ctx, c.q.rescueCandidates, limit)
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
		delays = append(delays, c.config.RetryPolicy.NextRetry(attempt, ErrJobLeaseLost).Microseconds())
	}
	if err := rows.Err(); err != nil {
		return 0, dbError("rescue", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if c.testHooks.beforeRescueWrite != nil {
		c.testHooks.beforeRescueWrite(ids)
	}
	tag, err := c.pool.Exec(ctx, c.q.rescue, oneShotPlan, ids, fences, delays)
	if err != nil {
		return 0, dbError("rescue", err)
	}
	return int(tag.RowsAffected()), nil
}
