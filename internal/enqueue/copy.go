package enqueue

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// CopyStream runs one COPY, inside the savepoint sp, of the jobs of src
// that are (later) or are not scheduled, noting in due the queues of the
// jobs due now, and returns how many it wrote. Copy's own is the
// hand-written binary encoder; tests hold it to pgx's CopyFrom through
// this type.
type CopyStream func(ctx context.Context, sp pgx.Tx, src Source, later bool, due map[string]bool) (int64, error)

// Copy writes src with COPY in binary format, each COPY run by stream
// (nil: the hand-written encoder). Jobs are encoded while the server reads
// the stream, so JSON encoding overlaps the insert instead of preceding
// it. An invalid job can therefore come to light mid-stream: the COPY runs
// inside a savepoint, and rolling back to it leaves tx as it was.
//
// Jobs with a RunAt are written as scheduled, and the scheduler makes the
// due ones available: COPY cannot compare with now(), and the client's
// clock is never compared with the database's. The result's Queues are
// those of the jobs due now. src.Unique is not looked at: a unique job's
// key would be dropped.
func (w *Writer) Copy(ctx context.Context, tx pgx.Tx, src Source, stream CopyStream) (Result, error) {
	if stream == nil {
		stream = w.copyStream
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return Result{}, dbError("enqueue many: savepoint", err)
	}
	n, due, err := copyInSavepoint(ctx, sp, src, stream)
	if err != nil {
		_ = sp.Rollback(context.WithoutCancel(ctx))
		return Result{}, err
	}
	if err := sp.Commit(ctx); err != nil {
		return Result{}, dbError("enqueue many: release savepoint", err)
	}
	if err := w.notifyQueues(ctx, tx, due); err != nil {
		return Result{}, err
	}
	return Result{Enqueued: n, Queues: due}, nil
}

func copyInSavepoint(ctx context.Context, sp pgx.Tx, src Source, stream CopyStream) (int64, map[string]bool, error) {
	var scheduled int
	for i := range src.N {
		if src.Later(i) {
			scheduled++
		}
	}
	due := map[string]bool{}
	var total int64
	for _, later := range []bool{false, true} {
		if later && scheduled == 0 || !later && scheduled == src.N {
			continue
		}
		n, err := stream(ctx, sp, src, later, due)
		if err != nil {
			return 0, nil, err
		}
		total += n
	}
	return total, due, nil
}

// copyStream runs one COPY of the jobs that are (later) or are not
// scheduled, fed by an encoder goroutine through a pipe. due collects the
// queues of the jobs due now.
func (w *Writer) copyStream(ctx context.Context, sp pgx.Tx, src Source, later bool, due map[string]bool) (int64, error) {
	sql := w.Q.CopyJobs
	if later {
		sql = w.Q.CopyJobsScheduled
	}

	pr, pw := io.Pipe()
	encodeErr := make(chan error, 1)
	go func() {
		err := w.encodeCopy(pw, src, later, due)
		encodeErr <- err
		pw.CloseWithError(err) // nil: EOF, the end of the stream
	}()
	// The stream goes to pgconn, below pgx's tracer: tell the connection's
	// tracer what pgx.Conn.CopyFrom would, so that a user's tracer
	// (otelpgx, a statement log) sees the COPY like any other statement.
	conn := sp.Conn()
	tracer, _ := conn.Config().Tracer.(pgx.CopyFromTracer)
	if tracer != nil {
		ctx = tracer.TraceCopyFromStart(ctx, conn, pgx.TraceCopyFromStartData{
			TableName:   pgx.Identifier{w.Schema, "jobs"},
			ColumnNames: copyColumnNames(later),
		})
	}
	tag, copyErr := conn.PgConn().CopyFrom(ctx, pr, sql)
	// The server may stop reading early (an error of its own, a cancelled
	// ctx): unblock the encoder, then wait for it.
	pr.CloseWithError(errCopyAborted)
	err := <-encodeErr
	if err == nil || errors.Is(err, errCopyAborted) {
		err = copyErr // otherwise the encoder's error aborted the COPY: report it
		if err != nil {
			err = dbError("enqueue many: copy", err)
		}
	}
	if tracer != nil {
		tracer.TraceCopyFromEnd(ctx, conn, pgx.TraceCopyFromEndData{CommandTag: tag, Err: err})
	}
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// copyColumns are the columns of sql/copy_jobs.sql, and with
// copyColumnsScheduled those of sql/copy_jobs_scheduled.sql, in the order
// appendCopyRow writes them; a tracer is told them.
var (
	copyColumns          = []string{"queue", "kind", "args", "priority", "max_attempts", "tags", "meta", "singleton_key", "partition_key", "sequence_key"}
	copyColumnsScheduled = append(copyColumns[:len(copyColumns):len(copyColumns)], "run_at", "state")
)

func copyColumnNames(later bool) []string {
	if later {
		return copyColumnsScheduled
	}
	return copyColumns
}

var errCopyAborted = errors.New("pgqueue: copy aborted")

// copyHeader starts every binary COPY stream: signature, flags, and the
// length of a header extension that is not used.
var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// textOID is the type of tags' elements in the binary array format.
const textOID = 25

// encodeCopy writes the binary COPY stream of the jobs that are (later)
// or are not scheduled. It checks each job as One does and stops at the
// first invalid one with its error.
func (w *Writer) encodeCopy(out io.Writer, src Source, later bool, due map[string]bool) error {
	bw := bufio.NewWriterSize(out, 64<<10)
	if _, err := bw.Write(copyHeader); err != nil {
		return err
	}
	// Most batches have one queue: check each name once, note it once.
	var validQueue, dueQueue string
	var buf []byte
	var p Params
	var job Job // one job at a time: its row is appended before the next
	for i := range src.N {
		if src.Later(i) != later {
			continue
		}
		if err := src.Params(i, &p); err != nil {
			return fmt.Errorf("job %d: %w", i, err)
		}
		if err := w.Encode(&p, validQueue, &job); err != nil {
			return fmt.Errorf("job %d: %w", i, err)
		}
		validQueue = job.Queue
		if !later && job.Queue != dueQueue {
			due[job.Queue], dueQueue = true, job.Queue
		}
		buf = appendCopyRow(buf[:0], &job, later)
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	if _, err := bw.Write([]byte{0xff, 0xff}); err != nil { // the trailer: field count -1
		return err
	}
	return bw.Flush()
}

// appendCopyRow appends one job as a binary COPY tuple whose fields follow
// the column list of sql/copy_jobs.sql (later: sql/copy_jobs_scheduled.sql).
func appendCopyRow(b []byte, job *Job, later bool) []byte {
	fields := len(copyColumns)
	if later {
		fields = len(copyColumnsScheduled)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(fields))
	b = appendText(b, job.Queue)
	b = appendText(b, job.Kind)
	b = appendJSONB(b, job.Args)
	b = binary.BigEndian.AppendUint32(b, 2)
	b = binary.BigEndian.AppendUint16(b, uint16(job.Priority))
	b = binary.BigEndian.AppendUint32(b, 4)
	b = binary.BigEndian.AppendUint32(b, uint32(int32(job.MaxAttempts)))
	b = appendTextArray(b, job.Tags)
	b = appendJSONB(b, job.Meta)
	b = appendNullText(b, job.SingletonKey)
	b = appendNullText(b, job.PartitionKey)
	b = appendNullText(b, job.SequenceKey)
	if later {
		b = binary.BigEndian.AppendUint32(b, 8)
		b = binary.BigEndian.AppendUint64(b, uint64(pgMicros(job.RunAt)))
		b = appendText(b, string(pgqueuetype.StateScheduled))
	}
	return b
}

func appendText(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// appendNullText writes s as text, or NULL when it is empty.
func appendNullText(b []byte, s string) []byte {
	if s == "" {
		return binary.BigEndian.AppendUint32(b, 0xffffffff) // NULL
	}
	return appendText(b, s)
}

// appendJSONB writes JSON text as binary jsonb: format version 1, then the
// text, which the server parses and validates.
func appendJSONB(b, json []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(json)+1))
	b = append(b, 1)
	return append(b, json...)
}

// appendTextArray writes a one-dimensional text[] without NULLs.
func appendTextArray(b []byte, elems []string) []byte {
	size := 12
	if len(elems) > 0 {
		size += 8
	}
	for _, e := range elems {
		size += 4 + len(e)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	ndim := uint32(0)
	if len(elems) > 0 {
		ndim = 1
	}
	b = binary.BigEndian.AppendUint32(b, ndim)
	b = binary.BigEndian.AppendUint32(b, 0) // no NULLs
	b = binary.BigEndian.AppendUint32(b, textOID)
	if ndim == 1 {
		b = binary.BigEndian.AppendUint32(b, uint32(len(elems)))
		b = binary.BigEndian.AppendUint32(b, 1) // lower bound
	}
	for _, e := range elems {
		b = appendText(b, e)
	}
	return b
}
