package producer

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/dberr"
	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/internal/schemawatch"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// Claimer runs sql/claim.sql, which decides which jobs a claim takes and
// in what order. Set its exported fields; the zero value of the rest is
// ready.
type Claimer struct {
	Pool    *pgxpool.Pool
	Queries *jobsql.Queries
	// Base is not the fetch context: a claim cancelled in flight may still
	// commit, and its rows would then wait for their lease with no one
	// working them.
	Base     context.Context
	JobLease time.Duration
	// ClientID is stored as the claimed jobs' worker_id.
	ClientID string
	// Schema is Config.Schema, part of the claim lock's key.
	Schema string
	Log    *slog.Logger
	// Claimed is Observer.Claimed; nil for none.
	Claimed func(queue string, jobs int)
	// Watch holds claims back while the schema is outdated; nil for none.
	Watch *schemawatch.Watch

	// lockWaits counts the claims that gave up waiting for the claim
	// lock; lastLockWarn is when that was last logged (UnixNano).
	lockWaits, lastLockWarn atomic.Int64
}

// Claim takes up to limit available jobs of queue, each with a new fence
// and a lease of jobLease. With locked, under the queue's claim lock, which
// makes claims of a busy queue cheaper (sql/claim_lock.sql) and those that
// must be exact possible: a limited queue's (flow, sql/claim_flow.sql,
// which claims nothing without the lock) and a sequence's jobs. When the
// lock is held too long (a client stalled mid-claim) it claims without
// it, leaving those jobs for the next claim.
//
// backlog reports whether the queue probably holds more jobs: a full claim
// says so; a limited queue's claim asks.
func (c *Claimer) Claim(queue string, limit int, flow, locked bool) (jobs []*pgqueuetype.JobRow, backlog bool, err error) {
	if err := c.Watch.Blocked(); err != nil {
		return nil, false, err
	}
	ctx, cancel := context.WithTimeout(c.Base, jobsql.WriteTimeout)
	defer cancel()
	claim := c.Queries.Claim
	if flow {
		claim = c.Queries.ClaimFlow
	}
	if locked || flow {
		jobs, backlog, err = c.claimLocked(ctx, claim, flow, queue, limit)
	} else {
		jobs, err = c.claimUnlocked(ctx, queue, limit)
	}
	if errors.Is(err, errClaimLockTimeout) {
		c.warnLockTimeout(queue)
		if flow {
			// Nothing of a limited queue without the lock; the backlog is
			// likely (a claim held the lock long).
			jobs, backlog, err = nil, true, nil
		} else {
			jobs, err = c.claimUnlocked(ctx, queue, limit)
		}
	}
	if err != nil {
		return nil, false, c.Watch.Observe(ctx, dberr.Wrap("pgqueue", "claim "+queue, err))
	}
	_ = c.Watch.Observe(ctx, nil)
	if c.Claimed != nil && len(jobs) > 0 {
		c.Claimed(queue, len(jobs))
	}
	if !flow {
		backlog = len(jobs) == limit
	}
	return jobs, backlog, nil
}

// claimLockWait is the longest a claim waits for its queue's claim lock
// before it claims without it.
const claimLockWait = time.Second

// errClaimLockTimeout: the claim lock was not granted within claimLockWait.
var errClaimLockTimeout = errors.New("claim lock not granted in time")

// claimLocked claims under the queue's claim lock: the lock, then the
// claim, in one round trip and one transaction (sql/claim_lock.sql says
// why).
// With flow, a third statement asks whether a backlog is left.
func (c *Claimer) claimLocked(ctx context.Context, claim string, flow bool, queue string, limit int) (jobs []*pgqueuetype.JobRow, backlog bool, err error) {
	b := &pgx.Batch{}
	b.Queue(c.Queries.ClaimLock, c.Schema, queue, claimLockWait.Milliseconds())
	b.Queue(claim, queue, limit, c.JobLease.Microseconds(), c.ClientID)
	if flow {
		b.Queue(c.Queries.FlowBacklog, queue)
	}
	br := c.Pool.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := br.Exec(); err != nil {
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == pgerrcode.LockNotAvailable {
			return nil, false, errClaimLockTimeout
		}
		return nil, false, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, false, err
	}
	if flow {
		jobs, err = jobsql.CollectJobRows(rows)
	} else {
		jobs, err = jobsql.CollectClaimedRows(rows, c.fill(queue))
	}
	if err != nil {
		return nil, false, err
	}
	if flow {
		if err := br.QueryRow().Scan(&backlog); err != nil {
			return nil, false, err
		}
	}
	return jobs, backlog, nil
}

// claimUnlocked claims without the claim lock: never a sequence's job.
// The claim's planner settings first, in one round trip and one
// transaction (sql/claim_settings.sql says why).
func (c *Claimer) claimUnlocked(ctx context.Context, queue string, limit int) (jobs []*pgqueuetype.JobRow, err error) {
	b := &pgx.Batch{}
	b.Queue(c.Queries.ClaimSettings)
	b.Queue(c.Queries.Claim, queue, limit, c.JobLease.Microseconds(), c.ClientID)
	br := c.Pool.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	return jobsql.CollectClaimedRows(rows, c.fill(queue))
}

// fill is what claim.sql's rows of queue leave out. The lease is the one
// the claim was sent, in whole microseconds.
func (c *Claimer) fill(queue string) jobsql.ClaimFill {
	return jobsql.ClaimFill{Queue: queue, WorkerID: c.ClientID, Lease: time.Duration(c.JobLease.Microseconds()) * time.Microsecond}
}

// warnLockTimeout says, at most once a minute per client, that a claim
// found its queue's claim lock held too long.
func (c *Claimer) warnLockTimeout(queue string) {
	c.lockWaits.Add(1)
	now := time.Now().UnixNano()
	last := c.lastLockWarn.Load()
	if now-last < int64(time.Minute) || !c.lastLockWarn.CompareAndSwap(last, now) {
		return
	}
	c.Log.Warn("pgqueue: a claim waited over "+claimLockWait.String()+" for its queue's claim lock and claimed without it (none of a limited queue or a sequence); a client may be stalled mid-claim",
		"queue", queue, "claims_without_lock", c.lockWaits.Load())
}
