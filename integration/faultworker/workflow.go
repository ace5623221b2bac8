package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pgqueue/pgqueue"
)

// WorkflowArgs are the args of a "wf" job, worked with -workflow (the
// fault test of workflows): Layer is the job's layer in its workflow, for
// the test's messages.
type WorkflowArgs struct {
	Layer int `json:"layer"`
}

// Kind implements pgqueue.JobArgs.
func (WorkflowArgs) Kind() string { return "wf" }

// workflowWorker works "wf" jobs by one of the two ways a job completes,
// chosen by the parity of its id so that both release paths meet the
// faults: an even job completes with CompleteTx and records its run (start,
// fence, the transaction's id) and an effect in that same transaction, so
// only a run whose fenced completion committed is recorded; an odd job
// returns nil and the client's batched completer completes it
// (complete_many.sql), where a stale result is refused in a statement
// that commits.
type workflowWorker struct {
	*effectWorker
}

// Work reads the start, waits (outside any transaction), then completes
// the job one of the two ways.
func (w workflowWorker) Work(ctx context.Context, job *pgqueue.Job[WorkflowArgs]) error {
	wctx, cancel := w.workContext(ctx)
	defer cancel()
	var start time.Time
	if err := w.pool.QueryRow(wctx, `SELECT clock_timestamp()`).Scan(&start); err != nil {
		return fmt.Errorf("read start: %w", err)
	}
	if err := sleep(wctx, w.sleepTime()); err != nil {
		return err
	}
	if job.ID%2 == 1 {
		return nil
	}
	reason, err := w.run(wctx, job, start)
	if err == nil {
		w.effects.Add(1)
		return nil
	}
	w.refusals.Add(1)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, rerr := w.pool.Exec(rctx, `INSERT INTO refusals (job_id, fence, worker, reason, error) VALUES ($1, $2, $3, $4, $5)`,
		job.ID, job.Fence, w.name, reason, err.Error()); rerr != nil {
		w.log.Debug("recording refusal failed", "job", job.ID, "err", rerr)
	}
	return err
}

func (w workflowWorker) run(ctx context.Context, job *pgqueue.Job[WorkflowArgs], start time.Time) (string, error) {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return reasonError, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := w.client.CompleteTx(ctx, tx, job.JobRow); err != nil {
		if errors.Is(err, pgqueue.ErrJobLeaseLost) {
			return reasonLeaseLost, err
		}
		return reasonError, err
	}
	// Holding the job's row lock, and its children's: a rescue skips it,
	// and no claim can see the children released before the commit.
	if err := sleep(ctx, w.sleepTime()/2); err != nil {
		return reasonError, err
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO wf_runs (job_id, fence, worker, started_at, ended_at, xid)
		VALUES ($1, $2, $3, $4, clock_timestamp(), pg_current_xact_id())`,
		job.ID, job.Fence, w.name, start); err != nil {
		return reasonError, fmt.Errorf("insert run: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO effects (job_id, fence, worker) VALUES ($1, $2, $3)`,
		job.ID, job.Fence, w.name); err != nil {
		return reasonError, fmt.Errorf("insert effect: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return reasonCommit, fmt.Errorf("commit: %w", err)
	}
	return "", nil
}
