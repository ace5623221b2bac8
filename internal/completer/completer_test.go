package completer

import (
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// The completer writes ids and fences as the text of a bigint[] and reads
// the ids of the result rows back as text, without pgx's boxing: both
// must agree with strconv.
func TestInt8Text(t *testing.T) {
	if got := string(appendInt8Array(nil, nil)); got != "{}" {
		t.Errorf("empty array %q, want {}", got)
	}
	if got := string(appendInt8Array([]byte("x"), []int64{1, -2, 1 << 62})); got != "x{1,-2,4611686018427387904}" {
		t.Errorf("array %q", got)
	}
	for _, n := range []int64{0, 7, 123456789012345678} {
		if got, ok := parseInt8Text([]byte(strconv.FormatInt(n, 10))); !ok || got != n {
			t.Errorf("parseInt8Text(%d) = %d, %v", n, got, ok)
		}
	}
	// What it leaves to pgx's scan: a sign, NULL, 19 digits, binary.
	for _, b := range [][]byte{[]byte("-1"), nil, []byte("1234567890123456789"), {0, 0, 0, 0, 0, 0, 0, 1}} {
		if _, ok := parseInt8Text(b); ok {
			t.Errorf("parseInt8Text(%q) ok, want left to pgx", b)
		}
	}
}

func TestResultOutcome(t *testing.T) {
	row := &pgqueuetype.JobRow{Attempt: 1, MaxAttempts: 2}
	last := &pgqueuetype.JobRow{Attempt: 2, MaxAttempts: 2}
	for _, tc := range []struct {
		r    Result
		want pgqueuetype.Outcome
	}{
		{Result{Row: row, Op: OpComplete}, pgqueuetype.OutcomeCompleted},
		{Result{Row: row, Op: OpFail}, pgqueuetype.OutcomeRetried},
		{Result{Row: last, Op: OpFail}, pgqueuetype.OutcomeDiscarded},
		{Result{Row: row, Op: OpDiscard}, pgqueuetype.OutcomeDiscarded},
		{Result{Row: row, Op: OpCancel}, pgqueuetype.OutcomeCancelled},
		{Result{Row: row, Op: OpSnooze}, pgqueuetype.OutcomeSnoozed},
		{Result{Row: row, Op: OpUnknownKind}, pgqueuetype.OutcomeSnoozed},
		{Result{Row: row, Op: OpRelease}, pgqueuetype.OutcomeReleased},
	} {
		if got := tc.r.Outcome(); got != tc.want {
			t.Errorf("%s (attempt %d of %d): %s, want %s", tc.r.Op, tc.r.Row.Attempt, tc.r.Row.MaxAttempts, got, tc.want)
		}
	}
}

// textRows is pgx.Rows over rows of text values, as QueryExecModeExec
// returns them.
type textRows struct {
	pgx.Rows
	rows [][][]byte
	i    int
}

var textFields = []pgconn.FieldDescription{{Format: pgtype.TextFormatCode}, {Format: pgtype.TextFormatCode}}

func (r *textRows) FieldDescriptions() []pgconn.FieldDescription { return textFields }
func (r *textRows) Next() bool                                   { r.i++; return r.i <= len(r.rows) }
func (r *textRows) RawValues() [][]byte                          { return r.rows[r.i-1] }
func (r *textRows) Err() error                                   { return nil }
func (r *textRows) Close()                                       {}
func (r *textRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }

// readResultRows reads complete_many.sql's rows (the count on a row of
// its own, with a null id; the refused ids with a null count) and
// finish.sql's (each updated id with the count), without allocating.
func TestReadResultRows(t *testing.T) {
	ids := map[int64]bool{}
	for _, tc := range []struct {
		name    string
		rows    [][][]byte
		ids     []int64
		settled int
		counted bool
	}{
		{"NoneRefused", [][][]byte{{nil, nil}}, nil, 0, true},
		{"NoneRefusedSettled", [][][]byte{{nil, []byte("3")}}, nil, 3, true},
		{"Refused", [][][]byte{{nil, []byte("2")}, {[]byte("41"), nil}, {[]byte("43"), nil}}, []int64{41, 43}, 2, true},
		{"Updated", [][][]byte{{[]byte("5"), []byte("1")}, {[]byte("6"), []byte("1")}}, []int64{5, 6}, 1, false},
		{"NoRows", nil, nil, 0, false},
	} {
		clear(ids)
		settled, counted, err := readResultRows(&textRows{rows: tc.rows}, ids)
		if err != nil || settled != tc.settled || counted != tc.counted || len(ids) != len(tc.ids) {
			t.Errorf("%s: ids %v, settled %d, counted %v, %v; want %v, %d, %v", tc.name, ids, settled, counted, err, tc.ids, tc.settled, tc.counted)
		}
		for _, id := range tc.ids {
			if !ids[id] {
				t.Errorf("%s: ids %v, want %v", tc.name, ids, tc.ids)
			}
		}
	}
	rows := &textRows{rows: [][][]byte{{nil, []byte("2")}, {[]byte("41"), nil}}}
	if n := testing.AllocsPerRun(100, func() {
		rows.i = 0
		clear(ids)
		if _, _, err := readResultRows(rows, ids); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("readResultRows allocates %v times per batch", n)
	}
}
