package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pgqueue/pgqueue"
)

// FlowArgs are the args of a "flow" job, worked with -flow (the fault
// test of flow control): N is the job's place in the test's insert order
// and Key the partition or sequence key the test meant it to have, so that
// the checks group runs by what the test asked for, not by what the job
// row says.
type FlowArgs struct {
	N   int    `json:"n"`
	Key string `json:"key,omitempty"`
}

// Kind implements pgqueue.JobArgs.
func (FlowArgs) Kind() string { return "flow" }

// flowWorker works "flow" jobs: each records its run interval in flow_runs,
// by the database clock, in the transaction that completes the job with
// CompleteTx, so that only the runs whose fenced completion committed are
// counted. The interval starts after the claim committed and ends before
// the completion commits: it lies inside the time the job held its slot.
type flowWorker struct {
	*effectWorker
}

// Work reads the start, waits (outside any transaction), then completes
// the job, waits again holding its row lock, and records the run and an
// effect before the commit.
func (w flowWorker) Work(ctx context.Context, job *pgqueue.Job[FlowArgs]) error {
	wctx, cancel := w.workContext(ctx)
	defer cancel()
	reason, err := w.run(wctx, job)
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

func (w flowWorker) run(ctx context.Context, job *pgqueue.Job[FlowArgs]) (string, error) {
	var start time.Time
	if err := w.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&start); err != nil {
		return reasonError, fmt.Errorf("read start: %w", err)
	}
	if err := sleep(ctx, w.sleepTime()); err != nil {
		return reasonError, err
	}
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
	// Holding the job's row lock: a rescue must not free its slot now.
	if err := sleep(ctx, w.sleepTime()/2); err != nil {
		return reasonError, err
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO flow_runs (job_id, fence, worker, queue, key, n, partition_key, sequence_key, started_at, ended_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, clock_timestamp())`,
		job.ID, job.Fence, w.name, job.Queue, job.Args.Key, job.Args.N, job.PartitionKey, job.SequenceKey, start); err != nil {
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
