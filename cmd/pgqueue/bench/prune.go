package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/pgqueue/pgqueue"
)

// benchRetention is every state's retention when the bench prunes: the
// backlog (finished a day or more ago) goes, the run's own jobs stay.
const benchRetention = time.Hour

// PruneResult is one timed drain of a backlog of finished jobs.
type PruneResult struct {
	Rows    int64
	Elapsed time.Duration
	// WAL is how many bytes of WAL the server wrote meanwhile (the
	// pruner's deletes, and whatever else ran on the server).
	WAL int64
	// Vacuum is how long a VACUUM (TRUNCATE) of the table took afterwards
	// (TRUNCATE: migration 15 turned truncation off for plain vacuums).
	Vacuum time.Duration
	// The table's heap and index bytes before the pruner started and after
	// the vacuum (VACUUM keeps the pages for new rows; only the pages at
	// the end of the heap are given back).
	HeapBefore, IndexesBefore, HeapAfter, IndexesAfter int64
}

// RowsPerSecond is the drain's rate.
func (r PruneResult) RowsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Rows) / r.Elapsed.Seconds()
}

func (r PruneResult) String() string {
	return fmt.Sprintf("prune      %9d rows in %8.3fs = %9.0f rows/s, %s of WAL\nvacuum after it: %.3fs; heap %s → %s, indexes %s → %s",
		r.Rows, r.Elapsed.Seconds(), r.RowsPerSecond(), mib(r.WAL), r.Vacuum.Seconds(),
		mib(r.HeapBefore), mib(r.HeapAfter), mib(r.IndexesBefore), mib(r.IndexesAfter))
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// addPruneBacklog inserts cfg.PruneBacklog finished jobs that every
// bench retention has passed (see sql/prune_backlog.sql).
func addPruneBacklog(ctx context.Context, cfg *Config) error {
	if cfg.PruneBacklog == 0 {
		return nil
	}
	q, err := cfg.queries()
	if err != nil {
		return err
	}
	if _, err := cfg.Pool.Exec(ctx, q.pruneBacklog, cfg.PruneBacklog, queue); err != nil {
		return fmt.Errorf("prune backlog: %w", err)
	}
	return nil
}

// setRetention sets pc's retention: when prune, benchRetention for every
// state, checked every second; else every finished job is kept, as before
// the pruner existed, so that runs without it measure nothing else.
func setRetention(pc *pgqueue.Config, prune bool) {
	if !prune {
		pc.CompletedJobRetention, pc.CancelledJobRetention, pc.DiscardedJobRetention = pgqueue.RetainForever, pgqueue.RetainForever, pgqueue.RetainForever
		return
	}
	pc.CompletedJobRetention, pc.CancelledJobRetention, pc.DiscardedJobRetention = benchRetention, benchRetention, benchRetention
	pc.PruneInterval = time.Second
}

// Prune times the library's pruner draining the backlog Prepare inserted
// (cfg.PruneBacklog rows): from Start of a client that works no queue, and
// so only leads the maintenance, until no job past the retention is left.
// It then times a VACUUM (TRUNCATE) of the table.
func Prune(ctx context.Context, cfg *Config) (PruneResult, error) {
	q, err := cfg.queries()
	if err != nil {
		return PruneResult{}, err
	}
	var res PruneResult
	if err := cfg.Pool.QueryRow(ctx, q.tableSizes).Scan(&res.HeapBefore, &res.IndexesBefore); err != nil {
		return res, fmt.Errorf("prune: sizes: %w", err)
	}
	var deleted0, wal0, wal1 int64
	if err := cfg.Pool.QueryRow(ctx, q.deletedRows).Scan(&deleted0); err != nil {
		return res, fmt.Errorf("prune: statistics: %w", err)
	}
	if err := cfg.Pool.QueryRow(ctx, q.walPosition).Scan(&wal0); err != nil {
		return res, fmt.Errorf("prune: wal: %w", err)
	}
	pc := &pgqueue.Config{Schema: cfg.schema(), Logger: quietLogger()}
	setRetention(pc, true)
	pc.PruneInterval = time.Hour // one run, at the start of the term, drains it all
	client, err := pgqueue.New(cfg.Pool, pc)
	if err != nil {
		return res, err
	}
	deleted := func() int64 {
		var n int64
		_ = cfg.Pool.QueryRow(ctx, q.deletedRows).Scan(&n)
		return n - deleted0
	}
	stopProgress := progress(cfg, "prune (rows by the statistics, a second behind)", deleted, int64(cfg.PruneBacklog))
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		stopProgress()
		return res, err
	}
	// Ask every 100 ms whether anything is left: the answer comes from the
	// same index the pruner walks, so it is not later than the pruner's.
	tick := time.NewTicker(100 * time.Millisecond)
	for pending := true; pending && err == nil; {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-tick.C:
			err = cfg.Pool.QueryRow(ctx, q.prunePending).Scan(&pending)
		}
	}
	tick.Stop()
	res.Elapsed = time.Since(start)
	stopErr := client.Stop(context.WithoutCancel(ctx))
	stopProgress()
	if err != nil {
		return res, fmt.Errorf("prune: %w", err)
	}
	if stopErr != nil {
		return res, stopErr
	}
	if err := cfg.Pool.QueryRow(ctx, q.pruneBacklogLeft).Scan(&res.Rows); err != nil {
		return res, fmt.Errorf("prune: %w", err)
	}
	res.Rows = int64(cfg.PruneBacklog) - res.Rows
	if err := cfg.Pool.QueryRow(ctx, q.walPosition).Scan(&wal1); err != nil {
		return res, fmt.Errorf("prune: wal: %w", err)
	}
	res.WAL = wal1 - wal0
	start = time.Now()
	if _, err := cfg.Pool.Exec(ctx, q.vacuumJobs); err != nil {
		return res, fmt.Errorf("prune: vacuum: %w", err)
	}
	res.Vacuum = time.Since(start)
	if err := cfg.Pool.QueryRow(ctx, q.tableSizes).Scan(&res.HeapAfter, &res.IndexesAfter); err != nil {
		return res, fmt.Errorf("prune: sizes: %w", err)
	}
	return res, nil
}

// BacklogLeft reports how many of the prune backlog's jobs are left after a
// run with cfg.Prune: none means the pruner ran out of work before the run
// ended, and the run measured less than a pruner busy throughout.
func BacklogLeft(ctx context.Context, cfg *Config) (int64, error) {
	q, err := cfg.queries()
	if err != nil {
		return 0, err
	}
	var n int64
	if err := cfg.Pool.QueryRow(ctx, q.pruneBacklogLeft).Scan(&n); err != nil {
		return 0, fmt.Errorf("prune backlog: %w", err)
	}
	return n, nil
}
