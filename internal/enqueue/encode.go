package enqueue

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// Params is one job as the caller asks for it: its args encoded already,
// its options not yet checked. The root fills it from its public
// EnqueueParams (or the args and their options directly); Encode checks
// it.
type Params struct {
	// Kind is the args' Kind().
	Kind string
	// Args are the args as JSON, kept without a copy: leave them alone
	// until the write returns.
	Args []byte
	// Queue is the job's queue; empty means Writer.DefaultQueue.
	Queue string
	// Priority orders jobs within a queue: lower runs first.
	Priority int16
	// RunAt is when the job is due; zero means now, by the database clock.
	RunAt time.Time
	// MaxAttempts is how many attempts the job gets; 0 means
	// Writer.DefaultMaxAttempts.
	MaxAttempts int
	// Tags are free labels kept with the job.
	Tags []string
	// Meta is free data kept with the job, encoded as JSON; nil for none.
	Meta map[string]any
	// SingletonKey is the job's singleton key; empty for none.
	SingletonKey string
	// PartitionKey is the job's partition key for per-key flow limits;
	// empty for none.
	PartitionKey string
	// SequenceKey is the job's sequence key; empty for none.
	SequenceKey string
	// Unique makes the job unique; nil for none.
	Unique *Unique
	// Name names the job for the dependencies of the other jobs of its
	// batch; empty for none.
	Name string
	// DependsOn are the jobs it waits for; a job with any is written
	// through Writer.Workflow.
	DependsOn []Dep
	// OnParentFailure is the policy of its dependencies that set none
	// ("cancel", "run" or "wait"); empty means "cancel".
	OnParentFailure string
	// Workflow is the existing workflow the job joins; 0 for none.
	Workflow int64
}

// Job is one job checked and encoded, as it is written: its fields are
// the columns of a job row. The writes take one job at a time and copy
// what they keep, so one Job serves a whole batch.
type Job struct {
	// Queue is the job's queue, checked.
	Queue string
	// Kind is the job's kind, checked.
	Kind string
	// Args are the args as JSON: the caller's bytes, not a copy.
	Args []byte
	// Priority orders jobs within a queue.
	Priority int16
	// MaxAttempts is how many attempts the job gets, the default applied.
	MaxAttempts int
	// RunAt is when the job is due; zero means now.
	RunAt time.Time
	// Tags are the job's tags; never nil, as the column is NOT NULL.
	Tags []string
	// Meta is the job's meta as JSON; {} for none.
	Meta []byte
	// SingletonKey is the job's singleton key; empty is NULL.
	SingletonKey string
	// PartitionKey is the job's partition key; empty is NULL.
	PartitionKey string
	// SequenceKey is the job's sequence key; empty is NULL.
	SequenceKey string

	unique *uniqueKey // nil unless Params.Unique
}

// nullArgs are a job's columns that may be NULL, as statement
// parameters (see args).
type nullArgs struct {
	runAt                          *time.Time
	singleton, partition, sequence *string
}

// nullArgs are RunAt and the keys as statement parameters, copied out of
// j so that j can stay on the stack: nil (NULL) for a zero RunAt and an
// empty key.
func (j *Job) nullArgs() nullArgs {
	var n nullArgs
	if !j.RunAt.IsZero() {
		t := j.RunAt
		n.runAt = &t
	}
	n.singleton, n.partition, n.sequence = nullText(j.SingletonKey), nullText(j.PartitionKey), nullText(j.SequenceKey)
	return n
}

// nullText is s as a parameter of a nullable text column: nil (NULL) when
// empty.
func nullText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// insertArgs are the parameters $1 to $11 of sql/insert.sql, which
// sql/insert_unique.sql and sql/insert_unique_upsert.sql take first too:
// job's columns, n its nullArgs. The slice has room for the unique
// statements' three more. JSON goes as text: in exec and simple_protocol
// mode pgx sends []byte as bytea, which a jsonb parameter refuses.
func (n nullArgs) insertArgs(job *Job) []any {
	return append(make([]any, 0, 14), job.Queue, job.Kind, string(job.Args), job.Priority, job.MaxAttempts, n.runAt,
		job.Tags, string(job.Meta), n.singleton, n.partition, n.sequence)
}

// emptyMeta is the meta of a job without any, shared by all of them: it
// is only ever read. Its capacity is its length, so an append copies.
var emptyMeta = []byte("{}")[:2:2]

// EncodeArgs checks args and encodes them as JSON, returning their kind.
// A nil args value is refused before its Kind method can panic.
func EncodeArgs(args pgqueuetype.JobArgs) (kind string, encoded []byte, err error) {
	if IsNilValue(args) { // a typed nil pointer's Kind() may panic
		return "", nil, fmt.Errorf("%w job args: nil args (%T)", pgqueuetype.ErrInvalid, args)
	}
	kind = args.Kind()
	if err := ValidateKind(kind); err != nil {
		return "", nil, err
	}
	if encoded, err = json.Marshal(args); err != nil {
		return "", nil, fmt.Errorf("%w job args: enqueue %s: %w", pgqueuetype.ErrInvalid, kind, err)
	}
	return kind, encoded, nil
}

// Encode checks p, as every insert does once its middleware ran, and
// fills job with it, ready to be written. validQueue, if not empty, is a
// queue name known to be valid: a batch passes the queue of the job
// before, so a run of jobs for one queue checks its name once.
func (w *Writer) Encode(p *Params, validQueue string, job *Job) error {
	kind := p.Kind
	if err := ValidateKind(kind); err != nil {
		return err
	}
	queue := cmp.Or(p.Queue, w.DefaultQueue)
	if queue != validQueue {
		if err := ValidateQueue(queue); err != nil {
			return fmt.Errorf("enqueue %s: %w", kind, err)
		}
	}
	if p.MaxAttempts < 0 || p.MaxAttempts > math.MaxInt32 {
		return fmt.Errorf("%w option: enqueue %s: MaxAttempts %d out of range", pgqueuetype.ErrInvalid, kind, p.MaxAttempts)
	}
	if len(p.Args) > w.MaxArgsSize {
		return fmt.Errorf("%w: job args: enqueue %s: %d bytes, limit %d", pgqueuetype.ErrTooLarge, kind, len(p.Args), w.MaxArgsSize)
	}
	meta := emptyMeta
	if p.Meta != nil {
		var err error
		if meta, err = json.Marshal(p.Meta); err != nil {
			return fmt.Errorf("%w job args: enqueue %s: meta: %w", pgqueuetype.ErrInvalid, kind, err)
		}
	}
	if err := validateInsert(p, meta); err != nil {
		return err
	}
	*job = Job{
		Queue:        queue,
		Kind:         kind,
		Args:         p.Args,
		Priority:     p.Priority,
		MaxAttempts:  cmp.Or(p.MaxAttempts, w.DefaultMaxAttempts),
		RunAt:        p.RunAt,
		Tags:         p.Tags,
		Meta:         meta,
		SingletonKey: p.SingletonKey,
		PartitionKey: p.PartitionKey,
		SequenceKey:  p.SequenceKey,
	}
	if job.Tags == nil {
		job.Tags = []string{}
	}
	if p.Unique != nil {
		var err error
		if job.unique, err = newUniqueKey(p.Unique, kind, queue, p.Args); err != nil {
			return err
		}
	}
	return nil
}
