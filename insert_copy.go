package pgqueue

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
)

// copyMany writes a large batch with COPY in binary format. Jobs are
// encoded while the server reads the stream, so JSON encoding overlaps the
// insert instead of preceding it. An invalid job can therefore come to
// light mid-stream: the COPY runs inside a savepoint, and rolling back to
// it leaves the caller's transaction as it was.
//
// Jobs with a RunAt are written as scheduled, and the scheduler makes the
// due ones available: COPY cannot compare with now(), and the client's
// clock is never compared with the database's. It returns how many jobs
// it wrote and the queues of those due now.
func (c *Client) copyMany(ctx context.Context, tx pgx.Tx, src copySource) (int64, map[string]bool, error) {
	return c.copyManyWith(ctx, tx, src, c.copyStream)
}

// copyStreamFunc runs one COPY of the jobs of src that are (later) or are
// not scheduled, noting in due the queues of jobs due now.
type copyStreamFunc func(ctx context.Context, sp pgx.Tx, src copySource, later bool, due map[string]bool) (int64, error)

// copyManyWith is copyMany with each COPY run by stream.
func (c *Client) copyManyWith(ctx context.Context, tx pgx.Tx, src copySource, stream copyStreamFunc) (int64, map[string]bool, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return 0, nil, dbError("enqueue many: savepoint", err)
	}
	n, due, err := copyInSavepoint(ctx, sp, src, stream)
	if err != nil {
		_ = sp.Rollback(context.WithoutCancel(ctx))
		return 0, nil, err
	}
	if err := sp.Commit(ctx); err != nil {
		return 0, nil, dbError("enqueue many: release savepoint", err)
	}
	return n, due, c.notifyQueues(ctx, tx, due)
}

// copySource is the jobs of a COPY: n of them, each encoded when the
// stream reaches it (see encodeResolved for validQueue); later says which
// are scheduled.
type copySource struct {
	n      int
	later  func(i int) bool
	encode func(i int, validQueue string) (*encodedJob, error)
}

func copyInSavepoint(ctx context.Context, sp pgx.Tx, src copySource, stream copyStreamFunc) (int64, map[string]bool, error) {
	var scheduled int
	for i := range src.n {
		if src.later(i) {
			scheduled++
		}
	}
	due := map[string]bool{}
	var total int64
	for _, later := range []bool{false, true} {
		if later && scheduled == 0 || !later && scheduled == src.n {
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
func (c *Client) copyStream(ctx context.Context, sp pgx.Tx, src copySource, later bool, due map[string]bool) (int64, error) {
	sql := c.q.CopyJobs
	if later {
		sql = c.q.CopyJobsScheduled
	}

	pr, pw := io.Pipe()
	encodeErr := make(chan error, 1)
	go func() {
		err := c.encodeCopy(pw, src, later, due)
		encodeErr <- err
		pw.CloseWithError(err) // nil: EOF, the end of the stream
	}()
	tag, copyErr := sp.Conn().PgConn().CopyFrom(ctx, pr, sql)
	// The server may stop reading early (an error of its own, a cancelled
	// ctx): unblock the encoder, then wait for it.
	pr.CloseWithError(errCopyAborted)
	if err := <-encodeErr; err != nil && !errors.Is(err, errCopyAborted) {
		return 0, err // the encoder's error aborted the COPY: report it
	}
	if copyErr != nil {
		return 0, dbError("enqueue many: copy", copyErr)
	}
	return tag.RowsAffected(), nil
}

var errCopyAborted = errors.New("pgqueue: copy aborted")

// copyHeader starts every binary COPY stream: signature, flags, and the
// length of a header extension that is not used.
var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// textOID is the type of tags' elements in the binary array format.
const textOID = 25

// encodeCopy writes the binary COPY stream of the jobs that are (later)
// or are not scheduled. It validates each job as Enqueue does and stops at
// the first invalid one with its error.
func (c *Client) encodeCopy(w io.Writer, src copySource, later bool, due map[string]bool) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	if _, err := bw.Write(copyHeader); err != nil {
		return err
	}
	// Most batches have one queue: check each name once, note it once.
	var validQueue, dueQueue string
	var buf []byte
	for i := range src.n {
		if src.later(i) != later {
			continue
		}
		job, err := src.encode(i, validQueue)
		if err != nil {
			return fmt.Errorf("job %d: %w", i, err)
		}
		validQueue = job.queue
		if !later && job.queue != dueQueue {
			due[job.queue], dueQueue = true, job.queue
		}
		buf = appendCopyRow(buf[:0], job, later)
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
func appendCopyRow(b []byte, job *encodedJob, later bool) []byte {
	fields := 8
	if later {
		fields = 10
	}
	b = binary.BigEndian.AppendUint16(b, uint16(fields))
	b = appendText(b, job.queue)
	b = appendText(b, job.kind)
	b = appendJSONB(b, job.args)
	b = binary.BigEndian.AppendUint32(b, 2)
	b = binary.BigEndian.AppendUint16(b, uint16(job.priority))
	b = binary.BigEndian.AppendUint32(b, 4)
	b = binary.BigEndian.AppendUint32(b, uint32(int32(job.maxAttempts)))
	b = appendTextArray(b, job.tags)
	b = appendJSONB(b, job.meta)
	if job.singleton == nil {
		b = binary.BigEndian.AppendUint32(b, 0xffffffff) // NULL
	} else {
		b = appendText(b, *job.singleton)
	}
	if later {
		b = binary.BigEndian.AppendUint32(b, 8)
		b = binary.BigEndian.AppendUint64(b, uint64(pgMicros(*job.runAt)))
		b = appendText(b, string(StateScheduled))
	}
	return b
}

func appendText(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
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
