package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/internal/schemawatch"
)

// Pruner deletes finished jobs (completed, cancelled, discarded) once their
// state's retention has passed since they finished. It runs on the
// maintenance leader. Each batch is one short statement (sql/prune.sql)
// walking jobs_finalized_idx, so a backlog of millions never holds a long
// transaction, and it touches final rows only, which no claim reads or
// locks.
type Pruner struct {
	Pool *pgxpool.Pool
	Q    *jobsql.Queries
	Log  *slog.Logger
	// Interval is the time between two rounds.
	Interval time.Duration
	// The retention of each final state; a negative one keeps its jobs.
	Completed, Cancelled, Discarded time.Duration
	// Watch holds its rounds back while the schema is outdated; nil for
	// none.
	Watch *schemawatch.Watch
	// Base is the context of each batch's statement: not the term's, so
	// that the end of the term lets a batch in flight finish rather than
	// cancel it. A cancelled statement costs its connection (pgx closes
	// it), and a TLS connection cut while it wrote cannot send its
	// Terminate: its close then waits pgx's 15 s, and so does the pool's
	// Close after Stop.
	Base context.Context
}

// pruneBatch is the most jobs one statement deletes.
const pruneBatch = 1000

// Run prunes at the start of the term and then every interval, until ctx
// (the term) ends. It returns at once when every state is kept forever.
func (p *Pruner) Run(ctx context.Context) {
	if p.Completed < 0 && p.Cancelled < 0 && p.Discarded < 0 {
		return
	}
	tick := time.NewTicker(p.Interval)
	defer tick.Stop()
	r := newRounds(p.Watch, p.Log, "prune")
	for {
		if !r.held() {
			n, err := p.prune(ctx)
			if n > 0 {
				p.Log.Info("pgqueue: pruned finished jobs", "jobs", n)
			}
			r.done(ctx, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// prune deletes the jobs past their retention batch after batch, until a
// batch comes back short or ctx ends, and returns how many it deleted.
// Each batch starts where the last one stopped in finalized_at order, so
// the index entries of rows deleted earlier in the run (dead until vacuum)
// are not walked again by every batch. Between two batches it rests as
// long as the last one took: a backlog is drained at half the speed the
// server could go, leaving it the CPU and WAL bandwidth for the claims and
// completions beside it (see docs/dev/measurements/2026-12-03-pruner.md).
func (p *Pruner) prune(ctx context.Context) (int, error) {
	total := 0
	var after time.Time // the year 1: before any job
	for ctx.Err() == nil {
		start := time.Now()
		n, last, err := p.pruneBatch(after, pruneBatch)
		total += n
		if err != nil || n < pruneBatch {
			return total, err
		}
		after = last
		rest := time.NewTimer(time.Since(start))
		select {
		case <-ctx.Done():
			rest.Stop()
		case <-rest.C:
		}
	}
	return total, nil
}

// pruneBatch deletes up to limit jobs past their retention that finished
// at after or later, and returns how many and when the last of them
// finished. Its statement runs under Base (bounded by WriteTimeout): one
// batch of at most limit rows, which Stop and a lost term wait for. A
// second leader's batch beside it is harmless: each skips the rows the
// other has locked.
func (p *Pruner) pruneBatch(after time.Time, limit int) (n int, last time.Time, err error) {
	ctx, cancel := context.WithTimeout(p.Base, jobsql.WriteTimeout)
	defer cancel()
	var lastAt *time.Time
	err = p.Pool.QueryRow(ctx, p.Q.Prune, after,
		retentionMicros(p.Completed), retentionMicros(p.Cancelled), retentionMicros(p.Discarded), limit,
	).Scan(&n, &lastAt)
	if err != nil {
		return 0, after, dbError("prune", err)
	}
	if lastAt != nil {
		last = *lastAt
	}
	return n, last, nil
}

// retentionMicros is a retention as sql/prune.sql takes it: microseconds,
// or NULL (nil) to keep the state forever.
func retentionMicros(d time.Duration) *int64 {
	if d < 0 {
		return nil
	}
	us := d.Microseconds()
	return &us
}
