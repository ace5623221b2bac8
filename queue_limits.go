package pgqueue

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgqueue/pgqueue/internal/enqueue"
)

// QueueLimits are a queue's flow limits: how many of its jobs run at once
// and how fast they start, across every client of the schema. The zero
// value sets none. docs/concepts/flow-control.md says what each
// guarantees.
//
// A job holds its slot from its claim until the fenced write that ends it
// commits, or until its lease is rescued: a client killed or stopped
// mid-job keeps its slots until then, and whatever it writes later is
// refused by the job's fence. Claims of a limited queue run one at a time
// under the queue's claim lock and claim only for idle workers.
type QueueLimits struct {
	// MaxRunning is the most jobs of the queue running at once; 0 for no
	// limit. Each client's MaxWorkers still applies beneath it.
	MaxRunning int
	// MaxRunningPerKey is the most jobs of one partition key running at
	// once; 0 for no limit. A job's key is InsertOpts.PartitionKey, else
	// the one PartitionBy derives; jobs without one are not limited per
	// key.
	MaxRunningPerKey int
	// Rate limits how many jobs start per period; the zero Rate sets none.
	Rate Rate
	// PartitionBy derives the partition key of the queue's jobs inserted
	// without one.
	PartitionBy PartitionBy
	// SequenceContinue lets a discarded or cancelled job of a sequence
	// (InsertOpts.SequenceKey) release the next one. By default it holds
	// the sequence until it is retried (JobRetry) or deleted (JobDelete).
	SequenceContinue bool
}

// Rate is a rate limit: at most Limit job starts within any Period, for the
// queue or, with PerKey, for each partition key. A retry is a start.
type Rate struct {
	// Limit is the most starts within any Period; 0 for no rate limit.
	Limit int
	// Period is the window the starts are counted in, at least a
	// millisecond.
	Period time.Duration
	// PerKey counts each partition key's starts apart; jobs without a key
	// are then not rate limited.
	PerKey bool
}

// PartitionBy says how a job inserted without InsertOpts.PartitionKey gets
// its partition key: from its kind, from up to four top-level fields of its
// args (each field's JSON value; a missing one counts as null), or both.
// The key is derived when jobs are claimed, so a change applies to the
// jobs already waiting too.
type PartitionBy struct {
	// Kind makes the job's kind part of the key.
	Kind bool
	// ArgsFields names the top-level args fields that make up the key.
	ArgsFields []string
}

// IsZero reports whether l sets no limit and no option.
func (l QueueLimits) IsZero() bool {
	return l.MaxRunning == 0 && l.MaxRunningPerKey == 0 && l.Rate == (Rate{}) &&
		!l.PartitionBy.Kind && len(l.PartitionBy.ArgsFields) == 0 && !l.SequenceContinue
}

// Limited reports whether l limits anything: a queue with limits is claimed
// one claim at a time.
func (l QueueLimits) Limited() bool {
	return l.MaxRunning > 0 || l.MaxRunningPerKey > 0 || l.Rate.Limit > 0
}

// maxPartitionFields is how many args fields a partition key may name
// (flow_key in migrations/000010_flow_control.up.sql reads four).
const maxPartitionFields = 4

func (l QueueLimits) validate() error {
	switch {
	case l.MaxRunning < 0:
		return fmt.Errorf("%w: MaxRunning %d is negative", ErrInvalid, l.MaxRunning)
	case l.MaxRunningPerKey < 0:
		return fmt.Errorf("%w: MaxRunningPerKey %d is negative", ErrInvalid, l.MaxRunningPerKey)
	case l.Rate.Limit < 0:
		return fmt.Errorf("%w: Rate.Limit %d is negative", ErrInvalid, l.Rate.Limit)
	case l.Rate.Limit > 0 && l.Rate.Period < time.Millisecond:
		return fmt.Errorf("%w: Rate.Period %v is under a millisecond", ErrInvalid, l.Rate.Period)
	case l.Rate.Limit == 0 && (l.Rate.Period != 0 || l.Rate.PerKey):
		return fmt.Errorf("%w: Rate.Period and Rate.PerKey need a Rate.Limit", ErrInvalid)
	case len(l.PartitionBy.ArgsFields) > maxPartitionFields:
		return fmt.Errorf("%w: PartitionBy.ArgsFields names %d fields, at most %d", ErrInvalid, len(l.PartitionBy.ArgsFields), maxPartitionFields)
	}
	for _, f := range l.PartitionBy.ArgsFields {
		if f == "" || !utf8.ValidString(f) || strings.ContainsRune(f, 0) {
			return fmt.Errorf("%w: PartitionBy.ArgsFields: field name %q is empty or not valid text", ErrInvalid, f)
		}
	}
	return nil
}

// QueueSetLimits stores the flow limits of the queue name, replacing those
// it had; the zero QueueLimits removes them. From the commit on every
// client's claims of the queue obey them; producers of the queue switch to
// limited claims at their next poll (Config.FetchPollInterval), claiming
// nothing of it meanwhile. Jobs running when a limit is lowered run on;
// no new one starts until the queue is under it. Invalid limits or name:
// ErrInvalid.
func (c *Client) QueueSetLimits(ctx context.Context, name string, limits QueueLimits) error {
	return c.queueSetLimits(ctx, c.pool, name, limits)
}

// QueueSetLimitsTx is QueueSetLimits inside the caller's transaction: the
// limits apply when tx commits.
func (c *Client) QueueSetLimitsTx(ctx context.Context, tx pgx.Tx, name string, limits QueueLimits) error {
	return c.queueSetLimits(ctx, tx, name, limits)
}

func (c *Client) queueSetLimits(ctx context.Context, db interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, name string, l QueueLimits) error {
	op := "set limits of queue " + name
	if err := ctxError(ctx, op); err != nil {
		return err
	}
	if err := enqueue.ValidateQueue(name); err != nil {
		return err
	}
	if err := l.validate(); err != nil {
		return fmt.Errorf("pgqueue: %s: %w", op, err)
	}
	positive := func(n int) *int {
		if n <= 0 {
			return nil
		}
		return &n
	}
	var periodUS *int64
	if l.Rate.Limit > 0 {
		us := l.Rate.Period.Microseconds()
		periodUS = &us
	}
	fields := l.PartitionBy.ArgsFields
	if fields == nil {
		fields = []string{}
	}
	_, err := db.Exec(ctx, c.q.QueueSetLimits, name, positive(l.MaxRunning), positive(l.MaxRunningPerKey),
		positive(l.Rate.Limit), periodUS, l.Rate.PerKey, l.PartitionBy.Kind, fields, l.SequenceContinue, c.channel)
	if err != nil {
		return dbError(op, err)
	}
	_, inTx := db.(pgx.Tx)
	c.log.InfoContext(ctx, "pgqueue: queue limits set", "queue", name, "in_tx", inTx,
		"max_running", l.MaxRunning, "max_running_per_key", l.MaxRunningPerKey,
		"rate_limit", l.Rate.Limit, "rate_period", l.Rate.Period, "rate_per_key", l.Rate.PerKey)
	return nil
}

// QueueHeld says why a queue's available jobs wait, as QueueHeldBack
// counts them.
type QueueHeld struct {
	// InSequence counts jobs waiting for an earlier job of their sequence
	// (running, waiting to run, or holding it discarded or cancelled).
	InSequence int64
	// ByKeyLimit counts jobs whose partition key is at MaxRunningPerKey;
	// ByKeyRate those whose key used its Rate (PerKey).
	ByKeyLimit, ByKeyRate int64
	// Ready counts the rest: jobs a claim may take now, unless the queue
	// as a whole is at its limit (AtMaxRunning, AtRate).
	Ready int64
	// Running is how many jobs of the queue run; KeysAtLimit how many
	// partition keys are at MaxRunningPerKey.
	Running, KeysAtLimit int64
	// RateStarts is how many starts the queue's own Rate counts in its
	// current window.
	RateStarts int64
	// AtMaxRunning and AtRate report that the queue as a whole can start
	// no job now.
	AtMaxRunning, AtRate bool
}

// QueueHeldBack counts the available jobs of the queue name by what holds
// them back: a sequence, a key's limit or rate, or nothing (Ready, which
// the queue's own MaxRunning or Rate may still hold: AtMaxRunning, AtRate).
// It reads every available job of the queue: an operator's look, costing
// in proportion to the backlog.
func (c *Client) QueueHeldBack(ctx context.Context, name string) (*QueueHeld, error) {
	op := "count held jobs of queue " + name
	if err := ctxError(ctx, op); err != nil {
		return nil, err
	}
	if err := enqueue.ValidateQueue(name); err != nil {
		return nil, err
	}
	var h QueueHeld
	err := c.pool.QueryRow(ctx, c.q.QueueHeld, name).Scan(&h.InSequence, &h.ByKeyLimit, &h.ByKeyRate, &h.Ready,
		&h.Running, &h.KeysAtLimit, &h.RateStarts, &h.AtMaxRunning, &h.AtRate)
	if err != nil {
		return nil, dbError(op, err)
	}
	return &h, nil
}
