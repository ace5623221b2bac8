package pgqueue

import (
	"context"

	"github.com/pgqueue/pgqueue/internal/completer"
	"github.com/pgqueue/pgqueue/internal/jobsql"
)

// FinishBatch writes the results ops[i] of jobs[i] in one statement, as
// the completer writes a mixed batch (sql/finish.sql; sql/complete_many.sql
// when every op is "complete", sql/complete_one.sql for one completion),
// and returns the ids it updated: those of the batch it did not refuse.
func FinishBatch(ctx context.Context, c *Client, jobs []*JobRow, ops []string) (map[int64]bool, error) {
	written, _, err := WriteBatch(ctx, c, jobs, ops)
	return written, err
}

// WriteBatch is FinishBatch, and returns besides how many dependents the
// statement settled.
func WriteBatch(ctx context.Context, c *Client, jobs []*JobRow, ops []string) (written map[int64]bool, settled int, err error) {
	outcomes := &jobsql.OutcomeReader{Pool: c.pool, Q: c.q, Base: ctx}
	k := c.newCompleter(ctx, c.pool.Query, outcomes, completer.Observer{}, len(jobs), 0)
	batch := make([]completer.Result, len(jobs))
	for i, j := range jobs {
		batch[i] = completer.Result{Row: j, Op: ops[i]}
	}
	refused, err := k.Exec(batch)
	if err != nil {
		return nil, 0, err
	}
	// Written: in the batch and not refused.
	written = make(map[int64]bool, len(jobs))
	for _, j := range jobs {
		if !refused[j.ID] {
			written[j.ID] = true
		}
	}
	return written, k.Settled(), nil
}

// CompleteManySQL and ClaimSQL are sql/complete_many.sql and sql/claim.sql
// of the client's schema, for EXPLAIN.
func CompleteManySQL(c *Client) string { return c.q.CompleteMany }

// CompleteOneSQL is sql/complete_one.sql of the client's schema.
func CompleteOneSQL(c *Client) string { return c.q.CompleteOne }

// HeartbeatSQL is sql/heartbeat.sql of the client's schema.
func HeartbeatSQL(c *Client) string { return c.q.Heartbeat }

// ClaimSQL is sql/claim.sql of the client's schema.
func ClaimSQL(c *Client) string { return c.q.Claim }

// PollSQL is sql/poll.sql of the client's schema.
func PollSQL(c *Client) string { return c.q.Poll }

// ParentOutputsSQL and ParentCountsSQL are sql/job_parent_outputs.sql and
// sql/job_parent_counts.sql of the client's schema, for EXPLAIN.
func ParentOutputsSQL(c *Client) string { return c.q.JobParentOutputs }

// ParentCountsSQL: see ParentOutputsSQL.
func ParentCountsSQL(c *Client) string { return c.q.JobParentCounts }

// FinishSQL is sql/finish.sql of the client's schema, for EXPLAIN.
func FinishSQL(c *Client) string { return c.q.Finish }
