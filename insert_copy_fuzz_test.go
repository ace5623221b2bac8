package pgqueue_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// rawJSONArgs are args whose JSON is given: empty objects, bare values, huge
// documents and escapes reach the encoders as they are.
type rawJSONArgs struct {
	K    string
	JSON string
}

func (a rawJSONArgs) Kind() string { return a.K }

func (a rawJSONArgs) MarshalJSON() ([]byte, error) { return []byte(a.JSON), nil }

// copyRowSQL reads back every column a COPY writes, NULLs kept apart from
// empty strings, tags also in their text form (which shows dimensions and
// bounds), run_at only where the job carried one: due-now rows take the
// transaction's now().
const copyRowSQL = `SELECT jsonb_build_array(queue, kind, args, priority, max_attempts, tags, tags::text,
	meta, singleton_key, partition_key, sequence_key, state, CASE WHEN state = 'scheduled' THEN run_at END, attempt, errors)::text
	FROM pgqueue.jobs WHERE id > $1 ORDER BY id`

// copyBoth writes params through the hand-written COPY encoder and then
// through pgx's CopyFrom, and returns each one's rows (copyRowSQL) or
// error.
func copyBoth(t *testing.T, c *pgqueue.Client, pool *pgxpool.Pool, params []pgqueue.EnqueueManyParams) (hand, viaPgx []string, handErr, pgxErr error) {
	t.Helper()
	ctx := context.Background()
	rows := func(viaPgx bool) ([]string, error) {
		var last int64
		must(t, pool.QueryRow(ctx, "SELECT coalesce(max(id), 0) FROM pgqueue.jobs").Scan(&last))
		n, err := pgqueue.EnqueueManyCopy(ctx, c, params, viaPgx)
		got, qerr := pool.Query(ctx, copyRowSQL, last)
		must(t, qerr)
		out, qerr := pgx.CollectRows(got, pgx.RowTo[string])
		must(t, qerr)
		if err != nil {
			if len(out) > 0 {
				t.Fatalf("viaPgx=%v failed (%v) and left %d rows", viaPgx, err, len(out))
			}
			return nil, err
		}
		if n != int64(len(params)) || len(out) != len(params) {
			t.Fatalf("viaPgx=%v: %d inserted, %d read back, want %d", viaPgx, n, len(out), len(params))
		}
		return out, nil
	}
	hand, handErr = rows(false)
	viaPgx, pgxErr = rows(true)
	return hand, viaPgx, handErr, pgxErr
}

// copyErrorKinds are the sentinels a refused batch may carry.
var copyErrorKinds = append(slices.Clone(typedInsertErrors), pgqueue.ErrInvalid)

func copyErrorKind(err error) error {
	for _, s := range copyErrorKinds {
		if errors.Is(err, s) {
			return s
		}
	}
	return nil
}

// checkCopyEncodersAgree fails unless the hand-written encoder and pgx's
// stored the same rows, or both refused the batch with the same typed
// error (or both with the server's).
func checkCopyEncodersAgree(t *testing.T, c *pgqueue.Client, pool *pgxpool.Pool, params []pgqueue.EnqueueManyParams) {
	t.Helper()
	hand, viaPgx, handErr, pgxErr := copyBoth(t, c, pool, params)
	if (handErr == nil) != (pgxErr == nil) || copyErrorKind(handErr) != copyErrorKind(pgxErr) {
		t.Fatalf("hand-written: %v; pgx: %v", handErr, pgxErr)
	}
	if handErr != nil && handErr.Error() != pgxErr.Error() && copyErrorKind(handErr) != nil {
		t.Fatalf("typed errors differ:\nhand-written: %v\npgx:          %v", handErr, pgxErr)
	}
	for i := range hand {
		if hand[i] != viaPgx[i] {
			t.Fatalf("job %d:\nhand-written: %.500s\npgx:          %.500s", i, hand[i], viaPgx[i])
		}
	}
}

// copyFuzzBatch is the batch of one fuzzed job: the job itself, a job
// with defaults, and the job again scheduled if it was due now or due now
// if it was scheduled, so that both COPY streams carry it.
func copyFuzzBatch(args pgqueue.JobArgs, opts pgqueue.EnqueueOpts) []pgqueue.EnqueueManyParams {
	other := opts
	if opts.RunAt.IsZero() {
		other.RunAt = time.Date(2030, 1, 2, 3, 4, 5, 6789, time.UTC)
	} else {
		other.RunAt = time.Time{}
	}
	return []pgqueue.EnqueueManyParams{
		{Args: args, Opts: &opts},
		{Args: anyKindArgs{K: "plain", S: "x"}},
		{Args: args, Opts: &other},
	}
}

// The edge values of every column: both encoders store the same rows.
func TestCopyEncodersAgreeOnEdgeValues(t *testing.T) {
	skipInShortMode(t, "edge values up to 2.5 MiB through both COPY encoders")
	t.Parallel()
	pool := newPool(t)
	c := newClient(t, pool, &pgqueue.Config{MaxArgsSize: 8 << 20})
	huge := `{"s":"` + strings.Repeat("ü\\\"x", 1<<19) + `"}` // 2.5 MiB, escapes throughout
	for _, tc := range []struct {
		name string
		args pgqueue.JobArgs
		opts pgqueue.EnqueueOpts
	}{
		{"defaults and NULL singleton key", rawJSONArgs{K: "k", JSON: `{}`}, pgqueue.EnqueueOpts{}},
		{"empty array args", rawJSONArgs{K: "k", JSON: `[]`}, pgqueue.EnqueueOpts{}},
		{"bare values as args", rawJSONArgs{K: "k", JSON: `"str"`}, pgqueue.EnqueueOpts{Meta: map[string]any{}}},
		{"null args", rawJSONArgs{K: "k", JSON: `null`}, pgqueue.EnqueueOpts{}},
		{"huge args", rawJSONArgs{K: "k", JSON: huge}, pgqueue.EnqueueOpts{}},
		{"json escapes and numbers", rawJSONArgs{K: "k", JSON: `{"a":"\u00e9\n\t\\\"\u2028","n":1.50e+300,"z":-0,"big":123456789012345678901234567890}`}, pgqueue.EnqueueOpts{}},
		{"unicode everywhere", anyKindArgs{K: "kïnd✓", S: "ünïcode ✓ 𝄞 \u2028 \ufffd"}, pgqueue.EnqueueOpts{
			Queue: "q.ü-not-valid", Tags: []string{"ç", "𝄞"}, SingletonKey: "ключ", Meta: map[string]any{"ü": "𝄞"}}},
		{"unicode valid queue", anyKindArgs{K: "kïnd✓", S: "ünïcode ✓ 𝄞"}, pgqueue.EnqueueOpts{
			Queue: "q.1-a_b", Tags: []string{"ç", "𝄞"}, SingletonKey: "ключ", Meta: map[string]any{"ü": "𝄞"}}},
		{"tags with quotes, commas, braces, empty, NULL", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{
			Tags: []string{`"`, `a,b`, "", `{x}`, `\`, "NULL", "null", " ", `a"b,c{d}\e`}}},
		{"empty tags", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{Tags: []string{}}},
		{"one empty tag", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{Tags: []string{""}}},
		{"many tags", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{Tags: slices.Repeat([]string{"t"}, 10_000)}},
		{"max priority and attempts", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{Priority: math.MaxInt16, MaxAttempts: math.MaxInt32}},
		{"min priority, one attempt", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{Priority: math.MinInt16, MaxAttempts: 1}},
		{"attempts out of range", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{MaxAttempts: math.MaxInt32 + 1}},
		{"negative attempts", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{MaxAttempts: -1}},
		{"meta", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{Meta: map[string]any{"n": 1.5, "s": "x\"y", "l": []any{1, "a", nil}, "o": map[string]any{}}}},
		{"meta NUL refused", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{Meta: map[string]any{"m": "\x00"}}},
		{"singleton key", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{SingletonKey: " \tk\n" + strings.Repeat("key,\"{}\\", 1000) + " "}},
		{"flow keys", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{PartitionKey: " \tp\n,\"{}\\ ", SequenceKey: "ключ 𝄞"}},
		{"flow keys of 255 bytes", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{PartitionKey: strings.Repeat("é", 127) + "p", SequenceKey: strings.Repeat("s", 255)}},
		{"partition key alone", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{PartitionKey: "p"}},
		{"sequence key alone", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{SequenceKey: "s"}},
		{"partition key of 256 bytes refused", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{PartitionKey: strings.Repeat("p", 256)}},
		{"sequence key NUL refused", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{SequenceKey: "s\x00"}},
		{"year 1", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{RunAt: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"year 1, last µs of a day", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{RunAt: time.Date(1, 1, 1, 23, 59, 59, 999999999, time.UTC)}},
		{"year 9999", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{RunAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)}},
		{"before 2000, truncated", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{RunAt: time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.UTC)}},
		{"2000 epoch", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{RunAt: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"µs truncation, zone", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{RunAt: time.Date(2031, 2, 3, 4, 5, 6, 789012999, time.FixedZone("x", -5*3600-1800))}},
		{"monotonic clock reading", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{RunAt: time.Now().Add(time.Hour)}},
		{"year 10000 refused", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{RunAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"bad queue refused", anyKindArgs{K: "k"}, pgqueue.EnqueueOpts{Queue: "Bad Queue"}},
		{"args too large refused", rawJSONArgs{K: "k", JSON: `"` + strings.Repeat("x", 8<<20) + `"`}, pgqueue.EnqueueOpts{}},
		{"lone surrogate: the server refuses", rawJSONArgs{K: "k", JSON: `{"s":"\ud800"}`}, pgqueue.EnqueueOpts{}},
		{"everything", anyKindArgs{K: "all", S: "é"}, pgqueue.EnqueueOpts{
			Queue: "mail", Priority: -7, MaxAttempts: 3, Tags: []string{"a", ""}, Meta: map[string]any{"k": "v"},
			SingletonKey: "s", PartitionKey: "p", SequenceKey: "q", RunAt: time.Date(2040, 5, 6, 7, 8, 9, 123456789, time.UTC)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkCopyEncodersAgree(t, c, pool, copyFuzzBatch(tc.args, tc.opts))
		})
	}
}

// FuzzCopyEncoders feeds the same job to the hand-written COPY encoder and
// to pgx's CopyFrom and requires the same rows or the same error. Run it
// with: go test -run '^$' -fuzz FuzzCopyEncoders -fuzztime 3m .
func FuzzCopyEncoders(f *testing.F) {
	f.Add(`{"s":"x"}`, "kind", "default", "tag", "", "", int16(0), int64(0), "", int64(0), int64(0), "", "")
	f.Add(`{}`, "k", "q.1", `a,"b"`, "", " key\n", int16(math.MaxInt16), int64(math.MaxInt32), "m", int64(-62135596800), int64(0), "p", "")
	f.Add(`[1,"\u00e9",null]`, "kï", "mail", "{}", `\`, "ключ", int16(math.MinInt16), int64(1), "𝄞", int64(253402300799), int64(999999999), "", "ключ")
	f.Add(`"s"`, "k", "Bad", "", "NULL", "", int16(-1), int64(-1), "\x00", int64(946684799), int64(999999500), "p\x00", strings.Repeat("s", 256))
	f.Add(`{"a":"\ud800"}`, "k", "default", "t\x00", "", "k\xff", int16(1), int64(math.MaxInt32+1), "", int64(9e12), int64(1), "p\xff", "s")
	pool := newPool(f)
	c := newClient(f, pool, nil)
	f.Fuzz(func(t *testing.T, args, kind, queue, tag1, tag2, key string, priority int16, maxAttempts int64, meta string, sec, nsec int64, partition, sequence string) {
		opts := pgqueue.EnqueueOpts{Queue: queue, Priority: priority, MaxAttempts: int(maxAttempts), SingletonKey: key,
			PartitionKey: partition, SequenceKey: sequence}
		if tag1 != "" || tag2 != "" {
			opts.Tags = []string{tag1, tag2}
		}
		if meta != "" {
			opts.Meta = map[string]any{"m": meta}
		}
		if sec != 0 {
			opts.RunAt = time.Unix(sec, nsec)
		}
		checkCopyEncodersAgree(t, c, pool, copyFuzzBatch(rawJSONArgs{K: kind, JSON: args}, opts))
	})
}
