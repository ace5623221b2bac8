package pgqueue

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/enqueue"
)

// copyColumns are the columns a COPY of jobs due now writes, in the order
// of copyRow's values; copyColumnsScheduled adds those of scheduled jobs.
var (
	copyColumns          = []string{"queue", "kind", "args", "priority", "max_attempts", "tags", "meta", "singleton_key", "partition_key", "sequence_key"}
	copyColumnsScheduled = append(slices.Clip(copyColumns), "run_at", "state")
)

// copyStreamPgx is a COPY stream of enqueue.Writer.Copy through pgx's
// CopyFrom (pgx encodes each row, in a goroutine of its own, while the
// server reads) instead of the hand-written encoder: the oracle the
// row-identity tests hold the hand-written stream to
// (TestCopyEncodersAgreeOnEdgeValues, FuzzCopyEncoders), and the other
// side of BenchmarkCopyEncoder. It stays out of the library: it cost 1.6
// to 2.3 times the client CPU per job for the same end-to-end time
// (docs/dev/measurements/2026-12-02-burn-down-sustained-enqueue.md).
func (c *Client) copyStreamPgx(ctx context.Context, sp pgx.Tx, src enqueue.Source, later bool, due map[string]bool) (int64, error) {
	cols := copyColumns
	if later {
		cols = copyColumnsScheduled
	}
	// next runs on pgx's encoding goroutine; CopyFrom waits for it before
	// returning, so encodeErr and due are safe to read afterwards.
	var encodeErr error
	var validQueue, dueQueue string
	// pgx encodes a row before asking for the next, so the row, the job
	// it points into and the params are reused.
	row := make([]any, len(cols))
	var p enqueue.Params
	var job enqueue.Job
	i := -1
	next := func() ([]any, error) {
		for i++; i < src.N && src.Later(i) != later; i++ {
		}
		if i >= src.N {
			return nil, nil
		}
		err := src.Params(i, &p)
		if err == nil {
			err = c.enq.Encode(&p, validQueue, &job)
		}
		if err != nil {
			encodeErr = fmt.Errorf("job %d: %w", i, err)
			return nil, encodeErr
		}
		validQueue = job.Queue
		if !later && job.Queue != dueQueue {
			due[job.Queue], dueQueue = true, job.Queue
		}
		copyRow(row, &job, later)
		return row, nil
	}
	n, err := sp.CopyFrom(ctx, pgx.Identifier{c.config.Schema, "jobs"}, cols, pgx.CopyFromFunc(next))
	if encodeErr != nil {
		return 0, encodeErr // it aborted the COPY: report it, not the server's echo
	}
	if err != nil {
		return 0, dbError("enqueue many: copy", err)
	}
	return n, nil
}

// copyRow fills row with job's values in the order of copyColumns (later:
// copyColumnsScheduled). JSON goes as []byte, which pgx writes as it is.
func copyRow(row []any, job *enqueue.Job, later bool) {
	null := func(s *string) *string { // NULL when empty
		if *s == "" {
			return nil
		}
		return s
	}
	row[0], row[1], row[2] = job.Queue, job.Kind, job.Args
	row[3], row[4], row[5] = job.Priority, int32(job.MaxAttempts), job.Tags
	row[6], row[7] = job.Meta, null(&job.SingletonKey)
	row[8], row[9] = null(&job.PartitionKey), null(&job.SequenceKey)
	if later {
		row[10], row[11] = job.RunAt, string(StateScheduled)
	}
}
