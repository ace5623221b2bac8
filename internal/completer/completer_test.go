package completer

import (
	"strconv"
	"testing"

	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// The completer writes ids and fences as the text of a bigint[] and reads
// the updated ids back as text, without pgx's boxing: both must agree
// with strconv.
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
