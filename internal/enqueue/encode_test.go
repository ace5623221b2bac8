package enqueue

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue/pgqueuetype"
)

var testWriter = &Writer{MaxArgsSize: 64, DefaultQueue: "default", DefaultMaxAttempts: 25}

// Encode applies the defaults and keeps the caller's args bytes.
func TestEncodeDefaults(t *testing.T) {
	args := []byte(`{"a":1}`)
	var job Job
	if err := testWriter.Encode(&Params{Kind: "k", Args: args}, "", &job); err != nil {
		t.Fatal(err)
	}
	if job.Queue != "default" || job.MaxAttempts != 25 || job.Tags == nil || string(job.Meta) != "{}" || !job.RunAt.IsZero() || job.unique != nil {
		t.Fatalf("defaults not applied: %+v", job)
	}
	if &job.Args[0] != &args[0] {
		t.Fatal("args copied")
	}
	if n := job.nullArgs(); n.runAt != nil || n.singleton != nil || n.partition != nil || n.sequence != nil {
		t.Fatalf("nullArgs = %+v, want NULLs", n)
	}
}

// Every refusal carries its sentinel.
func TestEncodeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Params
		want error
	}{
		{"empty kind", Params{Args: []byte(`{}`)}, pgqueuetype.ErrInvalid},
		{"bad queue", Params{Kind: "k", Args: []byte(`{}`), Queue: "Bad"}, pgqueuetype.ErrInvalid},
		{"attempts", Params{Kind: "k", Args: []byte(`{}`), MaxAttempts: -1}, pgqueuetype.ErrInvalid},
		{"too large", Params{Kind: "k", Args: make([]byte, 65)}, pgqueuetype.ErrTooLarge},
		{"NUL tag", Params{Kind: "k", Args: []byte(`{}`), Tags: []string{"a\x00"}}, pgqueuetype.ErrInvalid},
		{"year 10000", Params{Kind: "k", Args: []byte(`{}`), RunAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, pgqueuetype.ErrInvalid},
		{"NUL in args", Params{Kind: "k", Args: []byte(`{"s":"\u0000"}`)}, pgqueuetype.ErrInvalid},
		{"partition key too long", Params{Kind: "k", Args: []byte(`{}`), PartitionKey: strings.Repeat("p", 256)}, pgqueuetype.ErrInvalid},
		{"partition key NUL", Params{Kind: "k", Args: []byte(`{}`), PartitionKey: "p\x00"}, pgqueuetype.ErrInvalid},
		{"partition key invalid UTF-8", Params{Kind: "k", Args: []byte(`{}`), PartitionKey: "p\xff"}, pgqueuetype.ErrInvalid},
		{"sequence key too long", Params{Kind: "k", Args: []byte(`{}`), SequenceKey: strings.Repeat("é", 128)}, pgqueuetype.ErrInvalid},
		{"sequence key NUL", Params{Kind: "k", Args: []byte(`{}`), SequenceKey: "\x00"}, pgqueuetype.ErrInvalid},
		{"sequence key invalid UTF-8", Params{Kind: "k", Args: []byte(`{}`), SequenceKey: "s\xc3"}, pgqueuetype.ErrInvalid},
		{"unique states", Params{Kind: "k", Args: []byte(`{}`), Unique: &Unique{ByState: []pgqueuetype.JobState{pgqueuetype.StateCompleted}}}, pgqueuetype.ErrInvalid},
	} {
		var job Job
		if err := testWriter.Encode(&tc.p, "", &job); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}

// Partition and sequence keys of 1 to 255 bytes are kept, NULL when empty.
func TestEncodeFlowKeys(t *testing.T) {
	long := strings.Repeat("é", 127) + "k" // 255 bytes
	var job Job
	if err := testWriter.Encode(&Params{Kind: "k", Args: []byte(`{}`), PartitionKey: long, SequenceKey: "s"}, "", &job); err != nil {
		t.Fatal(err)
	}
	if job.PartitionKey != long || job.SequenceKey != "s" {
		t.Fatalf("keys %q, %q", job.PartitionKey, job.SequenceKey)
	}
	if n := job.nullArgs(); n.partition == nil || *n.partition != long || n.sequence == nil || *n.sequence != "s" || n.singleton != nil {
		t.Fatalf("nullArgs = %+v", n)
	}
	if got := len(job.nullArgs().insertArgs(&job)); got != 11 {
		t.Fatalf("%d insert args, want 11 (sql/insert.sql)", got)
	}
}

// A queue known to be valid is not checked again; any other is.
func TestEncodeValidQueue(t *testing.T) {
	var job Job
	if err := testWriter.Encode(&Params{Kind: "k", Args: []byte(`{}`), Queue: "Bad"}, "Bad", &job); err != nil {
		t.Fatalf("trusted queue checked again: %v", err)
	}
	if err := testWriter.Encode(&Params{Kind: "k", Args: []byte(`{}`), Queue: "Bad"}, "good", &job); err == nil {
		t.Fatal("untrusted queue not checked")
	}
}

// pgMicros counts from 2000-01-01 UTC and rounds down, before 2000 too.
func TestPgMicros(t *testing.T) {
	for _, tc := range []struct {
		t    time.Time
		want int64
	}{
		{time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), 0},
		{time.Date(2000, 1, 1, 0, 0, 1, 1999, time.UTC), 1_000_001},
		{time.Date(1999, 12, 31, 23, 59, 59, 999_999_999, time.UTC), -1},
	} {
		if got := pgMicros(tc.t); got != tc.want {
			t.Errorf("pgMicros(%s) = %d, want %d", tc.t, got, tc.want)
		}
	}
}

// Equal args give equal keys whatever their field order and spacing.
func TestUniqueKeyCanonicalArgs(t *testing.T) {
	u := &Unique{ByArgs: true}
	a, err := newUniqueKey(u, "k", "q", []byte(`{"b":1, "a":[1,2]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := newUniqueKey(u, "k", "q", []byte(`{"a":[1,2],"b":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(a.base) != string(b.base) {
		t.Fatal("equal args, different keys")
	}
	c, err := newUniqueKey(u, "k2", "q", []byte(`{"a":[1,2],"b":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(a.base) == string(c.base) {
		t.Fatal("different kinds, equal keys")
	}
}
