package pgqueue

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// copyColumns are the columns a COPY of jobs due now writes, in the order
// of copyRow's values; copyColumnsScheduled adds those of scheduled jobs.
var (
	copyColumns          = []string{"queue", "kind", "args", "priority", "max_attempts", "tags", "meta", "singleton_key"}
	copyColumnsScheduled = append(slices.Clip(copyColumns), "run_at", "state")
)

// copyStreamPgx is copyStream through pgx's CopyFrom (pgx encodes each
// row, in a goroutine of its own, while the server reads) instead of the
// hand-written encoder: the oracle the row-identity tests hold the
// hand-written stream to (TestCopyEncodersAgreeOnEdgeValues,
// FuzzCopyEncoders), and the other side of BenchmarkCopyEncoder. It stays
// out of the library: it cost 1.6 to 2.3 times the client CPU per job for
// the same end-to-end time (docs/performance.md).
func (c *Client) copyStreamPgx(ctx context.Context, sp pgx.Tx, src copySource, later bool, due map[string]bool) (int64, error) {
	cols := copyColumns
	if later {
		cols = copyColumnsScheduled
	}
	// next runs on pgx's encoding goroutine; CopyFrom waits for it before
	// returning, so encodeErr and due are safe to read afterwards.
	var encodeErr error
	var validQueue, dueQueue string
	row := make([]any, len(cols)) // pgx encodes a row before asking for the next
	i := -1
	next := func() ([]any, error) {
		for i++; i < src.n && src.later(i) != later; i++ {
		}
		if i >= src.n {
			return nil, nil
		}
		job, err := src.encode(i, validQueue)
		if err != nil {
			encodeErr = fmt.Errorf("job %d: %w", i, err)
			return nil, encodeErr
		}
		validQueue = job.queue
		if !later && job.queue != dueQueue {
			due[job.queue], dueQueue = true, job.queue
		}
		copyRow(row, job, later)
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
func copyRow(row []any, job *encodedJob, later bool) {
	row[0], row[1], row[2] = job.queue, job.kind, job.args
	row[3], row[4], row[5] = job.priority, int32(job.maxAttempts), job.tags
	row[6], row[7] = job.meta, job.singleton
	if later {
		row[8], row[9] = *job.runAt, string(StateScheduled)
	}
}
