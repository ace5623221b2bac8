package pgqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/executor"
	"github.com/pgqueue/pgqueue/internal/jobsql"
)

// ClientFromContext returns the client running the job whose context ctx
// is (or derives from), so a handler can enqueue follow-up jobs or call
// CompleteTx without a global. It returns nil outside a job's context.
func ClientFromContext(ctx context.Context) *Client {
	_, c := runningJob(ctx)
	return c
}

// runningJob returns the job whose context ctx is and the client running
// it (the executor's Owner), or nils outside a job's context.
func runningJob(ctx context.Context) (*executor.ActiveJob, *Client) {
	if j := executor.JobFromContext(ctx); j != nil {
		if c, ok := j.Owner().(*Client); ok {
			return j, c
		}
	}
	return nil, nil
}

// RecordOutput stores v, encoded as JSON, as the output of the job whose
// handler's context ctx is; JobGet and JobList read it back in
// JobRow.Output. Each call replaces the output recorded before, and the
// output stays after the job finishes.
//
// The write is fenced: it returns ErrJobLeaseLost once the handler's claim
// on the job is lost (also when the handler's context was cancelled for
// that reason, with context.Canceled), so a worker that paused past its lease cannot
// overwrite what the job's next holder records. It returns ErrNoJobContext
// when ctx is not a job's context, ErrInvalid when v does not encode,
// and ErrTooLarge when the JSON exceeds Config.MaxOutputSize.
func RecordOutput(ctx context.Context, v any) error {
	return recordJobJSON(ctx, "record output", v, func(q *jobsql.Queries) string { return q.JobOutput })
}

// RecordProgress stores v, encoded as JSON, as the progress of the job
// whose handler's context ctx is (JobRow.Progress), for operators to watch
// a long job: a percentage, counts, a phase, whatever the handler chooses.
// Each call replaces the last. Fenced and limited like RecordOutput.
func RecordProgress(ctx context.Context, v any) error {
	return recordJobJSON(ctx, "record progress", v, func(q *jobsql.Queries) string { return q.JobProgress })
}

// recordJobJSON encodes v and writes it with the statement query picks,
// under the fence of the job ctx runs.
func recordJobJSON(ctx context.Context, op string, v any, query func(*jobsql.Queries) string) error {
	j, c := runningJob(ctx)
	if j == nil {
		return fmt.Errorf("pgqueue: %s: %w", op, ErrNoJobContext)
	}
	row := j.Row()
	op = fmt.Sprintf("%s of job %d", op, row.ID)
	if err := ctxError(ctx, op); err != nil {
		return err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("pgqueue: %s: %w job args: %w", op, ErrInvalid, err)
	}
	if len(data) > c.config.MaxOutputSize {
		return fmt.Errorf("pgqueue: %s: %w: output: %d bytes, limit %d", op, ErrTooLarge, len(data), c.config.MaxOutputSize)
	}
	var id int64
	// As text, so the statement works in every query exec mode.
	err = c.pool.QueryRow(ctx, query(c.q), row.ID, row.Fence, string(data)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("pgqueue: %s with fence %d: %w", op, row.Fence, ErrJobLeaseLost)
	}
	if err != nil {
		// Cancelled while the statement ran: say why the handler's
		// context ended (ErrJobLeaseLost when its claim was lost).
		if cerr := ctxError(ctx, op); cerr != nil {
			return cerr
		}
		return dbError(op, err)
	}
	return nil
}
