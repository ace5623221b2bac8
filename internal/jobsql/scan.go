package jobsql

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// ScanJobRow reads a job row as returned by claim.sql and insert.sql, whose
// RETURNING lists must keep this order. NULL errors, tags or meta (the
// columns are NOT NULL: the claims return NULL for empty ones, to spare
// the server their output) read as empty.
func ScanJobRow(row pgx.CollectableRow) (*pgqueuetype.JobRow, error) {
	var s Scanner
	return s.Scan(row)
}

// CollectJobRows reads all the rows of a claim with one Scanner. When
// the columns come in pgx's binary formats with pgx's standard codecs (as
// they do from claim.sql), it decodes them itself (see fastScan); any other
// result, and any row with a value it does not expect, takes pgx's scan.
func CollectJobRows(rows pgx.Rows) ([]*pgqueuetype.JobRow, error) {
	return collect(rows, &Scanner{})
}

// RowScanner reads the job rows of one result: with its own decoding when
// the result's columns fit it (FastScanFits) and the row holds nothing out
// of the ordinary (FastScan returns nil otherwise), else with pgx's scan.
// Scanner reads the full job columns, ClaimScanner claim.sql's.
type RowScanner interface {
	FastScanFits(rows pgx.Rows) bool
	FastScan(v [][]byte) *pgqueuetype.JobRow
	Scan(row pgx.CollectableRow) (*pgqueuetype.JobRow, error)
}

// collect reads every row of rows with s.
func collect(rows pgx.Rows, s RowScanner) ([]*pgqueuetype.JobRow, error) {
	defer rows.Close()
	var out []*pgqueuetype.JobRow
	fast, checked := false, false
	for rows.Next() {
		if !checked {
			fast, checked = s.FastScanFits(rows), true
		}
		var j *pgqueuetype.JobRow
		if fast {
			j = s.FastScan(rows.RawValues())
		}
		if j == nil {
			var err error
			if j, err = s.Scan(rows); err != nil {
				return nil, err
			}
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// ClaimFill is what claim.sql's rows leave out because the claimer knows
// it: the queue claimed from, the client's id (the rows' worker_id) and
// the lease (lease_until is attempted_at plus the lease, both from the
// claim's now()). A claimed job is running and not finalized.
type ClaimFill struct {
	Queue, WorkerID string
	Lease           time.Duration
}

// claimedColumns gives, for each column of claim.sql's RETURNING list, its
// position among the job columns (jobColumnOIDs). The others are filled
// in from a ClaimFill: about a quarter of the bytes of a row, which the
// server no longer outputs nor the client reads.
var claimedColumns = [...]int{0, 2, 3, 4, 6, 7, 8, 9, 12, 13, 14, 15, 16, 18, 19, 20}

var claimedColumnOIDs = func() (oids [len(claimedColumns)]uint32) {
	for i, c := range claimedColumns {
		oids[i] = jobColumnOIDs[c]
	}
	return oids
}()

var runningState = []byte(pgqueuetype.StateRunning)

// CollectClaimedRows reads the rows of claim.sql, as CollectJobRows reads
// those of the other claims, filling in what they leave out from fill.
func CollectClaimedRows(rows pgx.Rows, fill ClaimFill) ([]*pgqueuetype.JobRow, error) {
	return collect(rows, NewClaimScanner(fill))
}

// ClaimScanner reads claim.sql's rows, filling in what they leave out.
type ClaimScanner struct {
	s             Scanner
	fill          ClaimFill
	queue, worker []byte
	full          [len(jobColumnOIDs)][]byte
}

// NewClaimScanner returns a scanner of claim.sql's rows for fill.
func NewClaimScanner(fill ClaimFill) *ClaimScanner {
	return &ClaimScanner{fill: fill, queue: []byte(fill.Queue), worker: []byte(fill.WorkerID)}
}

// FastScanFits is Scanner.FastScanFits for claim.sql's columns.
func (c *ClaimScanner) FastScanFits(rows pgx.Rows) bool {
	return c.s.fastScanFits(rows, claimedColumnOIDs[:])
}

// FastScan is Scanner.FastScan for a row of claim.sql: nil when pgx's
// scan must read it.
func (c *ClaimScanner) FastScan(v [][]byte) *pgqueuetype.JobRow {
	if len(v) != len(claimedColumns) {
		return nil
	}
	// The row as the other claims return it; lease_until and finalized_at
	// stay NULL, lease_until filled in below.
	for i, col := range claimedColumns {
		c.full[col] = v[i]
	}
	c.full[1], c.full[5], c.full[11] = c.queue, runningState, c.worker
	j := c.s.FastScan(c.full[:])
	if j != nil {
		j.LeaseUntil = j.AttemptedAt.Add(c.fill.Lease)
	}
	return j
}

// Scan reads a row of claim.sql with pgx's scan.
func (c *ClaimScanner) Scan(row pgx.CollectableRow) (*pgqueuetype.JobRow, error) {
	j, err := c.s.scanRow(row, claimedColumns[:])
	if err != nil {
		return nil, err
	}
	j.Queue, j.State, j.WorkerID = c.fill.Queue, pgqueuetype.StateRunning, c.fill.WorkerID
	j.LeaseUntil = j.AttemptedAt.Add(c.fill.Lease)
	return j, nil
}

// Scanner scans job rows. Reused across the rows of a claim, its
// scratch values and destination list cost their allocations once per
// claim instead of once per row.
type Scanner struct {
	// Of fastScan: where timestamps are shown (pgx's ScanLocation), the
	// strings of the last row (most rows of a claim share them), and the
	// blocks rows and their bytes are cut from.
	location                                   *time.Location
	jsonbBinary                                bool
	lastQueue, lastKind, lastState, lastWorker string
	rowBlock                                   []pgqueuetype.JobRow
	blockSize                                  int
	byteBlock                                  []byte

	v    scanned
	dest []any
}

// scanned holds what pgx's scan writes of a row before it is moved into
// the JobRow: one value, so that it is emptied at once for a result that
// leaves columns out.
type scanned struct {
	state                                string
	fence                                pgtype.Int8
	leaseUntil, attemptedAt, finalizedAt pgtype.Timestamptz
	workerID, singleton                  pgtype.Text
	partition, sequence                  pgtype.Text
	errs                                 []byte
}

func (s *Scanner) Scan(row pgx.CollectableRow) (*pgqueuetype.JobRow, error) {
	return s.scanRow(row, nil)
}

// ScanFlagged reads a row whose job columns follow a leading boolean, as
// insert_unique.sql returns them.
func (s *Scanner) ScanFlagged(row pgx.CollectableRow) (flag bool, _ *pgqueuetype.JobRow, err error) {
	j, err := s.scanRow(row, nil, &flag)
	return flag, j, err
}

// scanRow reads the job columns after the columns of lead: all of them,
// or those of columns (positions among the job columns, as
// claimedColumns), the others left zero.
func (s *Scanner) scanRow(row pgx.Row, columns []int, lead ...any) (*pgqueuetype.JobRow, error) {
	j := &pgqueuetype.JobRow{}
	all := [len(jobColumnOIDs)]any{&j.ID, &j.Queue, &j.Kind, &j.EncodedArgs, &j.Priority, &s.v.state, &j.Attempt, &j.MaxAttempts,
		&j.RunAt, &s.v.fence, &s.v.leaseUntil, &s.v.workerID, &s.v.errs, &j.Tags, &j.Meta,
		&j.CreatedAt, &s.v.attemptedAt, &s.v.finalizedAt, &s.v.singleton, &s.v.partition, &s.v.sequence}
	s.dest = append(s.dest[:0], lead...)
	if columns == nil {
		s.dest = append(s.dest, all[:]...)
	} else {
		s.v = scanned{}
		for _, c := range columns {
			s.dest = append(s.dest, all[c])
		}
	}
	if err := row.Scan(s.dest...); err != nil {
		return nil, err
	}
	j.State = pgqueuetype.JobState(s.v.state)
	j.Fence = s.v.fence.Int64
	j.LeaseUntil, j.AttemptedAt, j.FinalizedAt = s.v.leaseUntil.Time, s.v.attemptedAt.Time, s.v.finalizedAt.Time
	j.WorkerID, j.SingletonKey = s.v.workerID.String, s.v.singleton.String
	j.PartitionKey, j.SequenceKey = s.v.partition.String, s.v.sequence.String
	if j.Tags == nil {
		j.Tags = []string{}
	}
	if j.Meta == nil {
		j.Meta = []byte(emptyMeta)
	}
	if len(s.v.errs) == 0 || string(s.v.errs) == "[]" { // most rows: skip the decoder
		return j, nil
	}
	if err := json.Unmarshal(s.v.errs, &j.Errors); err != nil {
		return nil, fmt.Errorf("decode errors of job %d: %w", j.ID, err)
	}
	return j, nil
}

// The columns of claim.sql's RETURNING list, in order, with the types
// FastScan decodes them as.
var jobColumnOIDs = [...]uint32{
	pgtype.Int8OID, pgtype.TextOID, pgtype.TextOID, pgtype.JSONBOID, pgtype.Int2OID, pgtype.TextOID,
	pgtype.Int4OID, pgtype.Int4OID, pgtype.TimestamptzOID, pgtype.Int8OID, pgtype.TimestamptzOID,
	pgtype.TextOID, pgtype.JSONBOID, pgtype.TextArrayOID, pgtype.JSONBOID, pgtype.TimestamptzOID,
	pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID,
}

// FastScanFits reports whether fastScan can decode the rows of this
// result: every column of the expected type, in binary, decoded by pgx's
// standard codec (a connection may register others). It takes pgx's
// ScanLocation for timestamps.
func (s *Scanner) FastScanFits(rows pgx.Rows) bool {
	return s.fastScanFits(rows, jobColumnOIDs[:])
}

// fastScanFits is FastScanFits for a result of the columns of types oids.
func (s *Scanner) fastScanFits(rows pgx.Rows, oids []uint32) bool {
	fds := rows.FieldDescriptions()
	conn := rows.Conn()
	if len(fds) != len(oids) || conn == nil {
		return false
	}
	m := conn.TypeMap()
	for i, fd := range fds {
		if fd.DataTypeOID != oids[i] {
			return false
		}
		// pgx asks for text and jsonb as text, the others in binary.
		switch fd.DataTypeOID {
		case pgtype.TextOID:
		case pgtype.JSONBOID:
			s.jsonbBinary = fd.Format == pgtype.BinaryFormatCode // the same for every jsonb column
		default:
			if fd.Format != pgtype.BinaryFormatCode {
				return false
			}
		}
		t, ok := m.TypeForOID(fd.DataTypeOID)
		if !ok {
			return false
		}
		switch c := t.Codec.(type) {
		case pgtype.Int8Codec, pgtype.Int4Codec, pgtype.Int2Codec, pgtype.TextCodec, *pgtype.JSONBCodec:
		case *pgtype.TimestamptzCodec:
			s.location = c.ScanLocation
		case *pgtype.ArrayCodec:
			if _, ok := c.ElementType.Codec.(pgtype.TextCodec); !ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// FastScan decodes a claimed row's binary values as pgx's scan into the
// same fields would, without its per-column plans and with fewer
// allocations: rows and their bytes are cut from shared blocks, and a
// string equal to the last row's (queue, kind, state, worker) is reused.
// It returns nil for a row holding anything out of the ordinary (a NULL
// where the column is never NULL, an infinite timestamp, tags): pgx's scan
// reads that row instead, and reports its errors.
func (s *Scanner) FastScan(v [][]byte) *pgqueuetype.JobRow {
	if len(v) != len(jobColumnOIDs) {
		return nil
	}
	// Filled in place in the block, which moves on only on success: a row
	// left to pgx leaves its slot zero for the next.
	if len(s.rowBlock) == 0 {
		// Blocks grow with the claim, so a small claim wastes little.
		s.blockSize = min(max(2*s.blockSize, 8), 256)
		s.rowBlock = make([]pgqueuetype.JobRow, s.blockSize)
	}
	j := &s.rowBlock[0]
	row, ok := s.fastScanInto(j, v)
	if !ok {
		*j = pgqueuetype.JobRow{}
		return nil
	}
	s.rowBlock = s.rowBlock[1:]
	return row
}

// fastScanInto is fastScan's decoding into j.
func (s *Scanner) fastScanInto(j *pgqueuetype.JobRow, v [][]byte) (*pgqueuetype.JobRow, bool) {
	var ok bool
	if j.ID, ok = int8Value(v[0]); !ok {
		return nil, false
	}
	if v[1] == nil || v[2] == nil || v[5] == nil {
		return nil, false
	}
	j.Queue, s.lastQueue = reuseString(v[1], s.lastQueue)
	j.Kind, s.lastKind = reuseString(v[2], s.lastKind)
	var state string
	state, s.lastState = reuseString(v[5], s.lastState)
	j.State = pgqueuetype.JobState(state)
	if len(v[4]) != 2 || len(v[6]) != 4 || len(v[7]) != 4 {
		return nil, false
	}
	j.Priority = int16(binary.BigEndian.Uint16(v[4]))
	j.Attempt = int(int32(binary.BigEndian.Uint32(v[6])))
	j.MaxAttempts = int(int32(binary.BigEndian.Uint32(v[7])))
	if v[9] != nil {
		if j.Fence, ok = int8Value(v[9]); !ok {
			return nil, false
		}
	}
	if v[11] != nil {
		j.WorkerID, s.lastWorker = reuseString(v[11], s.lastWorker)
	}
	if v[18] != nil {
		j.SingletonKey = string(v[18])
	}
	if v[19] != nil {
		j.PartitionKey = string(v[19])
	}
	if v[20] != nil {
		j.SequenceKey = string(v[20])
	}
	// NOT NULL columns; the nullable ones are zero when NULL.
	if j.RunAt, ok = s.timeValue(v[8], false); !ok {
		return nil, false
	}
	if j.CreatedAt, ok = s.timeValue(v[15], false); !ok {
		return nil, false
	}
	if j.LeaseUntil, ok = s.timeValue(v[10], true); !ok {
		return nil, false
	}
	if j.AttemptedAt, ok = s.timeValue(v[16], true); !ok {
		return nil, false
	}
	if j.FinalizedAt, ok = s.timeValue(v[17], true); !ok {
		return nil, false
	}
	// NULL (a claim's empty tags) or an empty text[]: 0 dimensions, no
	// nulls, the element type.
	if v[13] != nil && (len(v[13]) != 12 || binary.BigEndian.Uint32(v[13]) != 0) {
		return nil, false
	}
	j.Tags = []string{} // as pgx scans it; no allocation
	args, meta, errs := s.jsonbText(v[3]), s.jsonbText(v[14]), s.jsonbText(v[12])
	if args == nil || (meta == nil && v[14] != nil) || (errs == nil && v[12] != nil) {
		return nil, false
	}
	if meta == nil {
		meta = []byte(emptyMeta)
	}
	if errs != nil && string(errs) != "[]" {
		if err := json.Unmarshal(errs, &j.Errors); err != nil {
			return nil, false // pgx's scan reports it
		}
	}
	j.EncodedArgs, j.Meta = s.bytes(args), s.bytes(meta)
	return j, true
}

// emptyMeta is the meta of a row whose meta column is NULL: a claim
// returns NULL for the empty object.
const emptyMeta = "{}"

// bytes returns a copy of b cut from the scanner's block, capacity
// limited so an append cannot reach the next row's bytes.
func (s *Scanner) bytes(b []byte) []byte {
	if len(b) > cap(s.byteBlock)-len(s.byteBlock) {
		if len(b) > 1024 {
			return append([]byte(nil), b...)
		}
		s.byteBlock = make([]byte, 0, 16<<10)
	}
	n := len(s.byteBlock)
	s.byteBlock = append(s.byteBlock, b...)
	return s.byteBlock[n : n+len(b) : n+len(b)]
}

// reuseString returns last if b spells it, else b as a new string; the
// second result is the string to compare the next row with.
func reuseString(b []byte, last string) (string, string) {
	if string(b) == last {
		return last, last
	}
	s := string(b)
	return s, s
}

// int8Value decodes a non-NULL binary bigint.
func int8Value(b []byte) (int64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b)), true
}

// jsonbText is a jsonb value's JSON text, nil for NULL or a binary format
// it does not know.
func (s *Scanner) jsonbText(b []byte) []byte {
	if !s.jsonbBinary || b == nil {
		return b
	}
	if len(b) < 2 || b[0] != 1 {
		return nil
	}
	return b[1:]
}

// The limits of pgx's timestamptz decoding, between which it returns
// time.Unix of the value.
var (
	minScanTime      = time.Date(-4713, 11, 24, 0, 0, 0, 0, time.UTC)
	maxScanTime      = time.Date(294277, 1, 1, 0, 0, 0, 0, time.UTC)
	pgEpochUnixMicro = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
)

// timeValue decodes a binary timestamptz as pgx does (time.Unix, in its
// ScanLocation if set); NULL is the zero time when nullable.
func (s *Scanner) timeValue(b []byte, nullable bool) (time.Time, bool) {
	if b == nil {
		return time.Time{}, nullable
	}
	if len(b) != 8 {
		return time.Time{}, false
	}
	us := int64(binary.BigEndian.Uint64(b))
	if us == math.MaxInt64 || us == math.MinInt64 { // infinity
		return time.Time{}, false
	}
	t := time.Unix(pgEpochUnixMicro/1_000_000+us/1_000_000, (us%1_000_000)*1_000)
	if t.Before(minScanTime) || !t.Before(maxScanTime) {
		return time.Time{}, false
	}
	if s.location != nil {
		t = t.In(s.location)
	}
	return t, true
}
