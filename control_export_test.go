package pgqueue

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/internal/maintenance"
	"github.com/pgqueue/pgqueue/internal/producer"
)

// ClaimTx runs the claim statement inside tx, as a producer's claim does in
// its own transaction: the claimed rows stay locked, and their new state
// unseen by others, until tx ends.
func ClaimTx(ctx context.Context, c *Client, tx pgx.Tx, queue string, limit int) ([]*JobRow, error) {
	rows, err := tx.Query(ctx, c.q.Claim, queue, limit, c.config.JobLease.Microseconds(), c.config.ID)
	if err != nil {
		return nil, err
	}
	return jobsql.CollectClaimedRows(rows, jobsql.ClaimFill{Queue: queue, WorkerID: c.config.ID, Lease: c.config.JobLease.Truncate(time.Microsecond)})
}

// Poll runs the poll statement for queues and returns the queues it says
// have jobs to claim.
func Poll(ctx context.Context, c *Client, queues []string) ([]string, error) {
	var out []string
	p := &producer.Poller{Pool: c.pool, Queries: c.q, Queues: queues, LeaderLease: maintenance.Lease,
		Wake: func(queue string, _ producer.Flow) { out = append(out, queue) }, LeaderFree: func() {}}
	err := p.Poll(ctx)
	return out, err
}
