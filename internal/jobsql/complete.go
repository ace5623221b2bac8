package jobsql

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/dberr"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// CompleteInTx runs sql/complete.sql for job in tx: pgqueuetype.ErrJobLeaseLost when
// the job no longer runs under job.Fence.
func CompleteInTx(ctx context.Context, tx pgx.Tx, q *Queries, job *pgqueuetype.JobRow) error {
	tag, err := tx.Exec(ctx, q.Complete, job.ID, job.Fence)
	if err != nil {
		return dberr.Wrap("pgqueue", fmt.Sprintf("complete job %d", job.ID), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("complete job %d with fence %d: %w", job.ID, job.Fence, pgqueuetype.ErrJobLeaseLost)
	}
	return nil
}
