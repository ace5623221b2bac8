package enqueue

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// The RunAt years every insert path stores exactly. PostgreSQL reaches
// further (4713 BC to 294276 AD), but a Go time outside 1–9999 has no
// RFC 3339 form and the text protocol could not carry it.
const (
	minRunAtYear = 1
	maxRunAtYear = 9999
)

// IsNilValue reports whether v is nil or an interface holding a nil
// pointer, map, slice, func or chan: calling a method on such a value can
// panic, and its JSON is null, not the job's args.
func IsNilValue(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// ValidateKind checks a kind as returned by JobArgs.Kind: stored in a text
// column and compared byte for byte, it must not be empty, and 255 bytes
// are plenty for a stable name.
func ValidateKind(kind string) error {
	if kind == "" || len(kind) > 255 {
		return fmt.Errorf("%w job kind: %q", pgqueuetype.ErrInvalid, kind)
	}
	if err := validateText("kind", kind); err != nil {
		return fmt.Errorf("%w job kind: %w", pgqueuetype.ErrInvalid, err)
	}
	return nil
}

// queuePattern is what a queue name must match: 1 to 63 bytes of lower-case
// letters, digits, '_', '-' and '.', starting with a letter or digit. The
// limit keeps a queue name usable inside a NOTIFY channel name.
var queuePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// ValidateQueue checks a queue name: every insert, the configured queues
// and queue pause and resume refuse the same names.
func ValidateQueue(name string) error {
	if !queuePattern.MatchString(name) {
		return fmt.Errorf("%w queue name: %q does not match %s", pgqueuetype.ErrInvalid, name, queuePattern)
	}
	return nil
}

// validateText refuses what PostgreSQL's text columns refuse, before it
// reaches the server: invalid UTF-8 and NUL bytes. what names the field.
func validateText(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s %q is not valid UTF-8", what, s)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%s %q holds a NUL byte", what, s)
	}
	return nil
}

// maxFlowKeyLen is the most bytes a partition or sequence key holds: the
// columns' CHECK allows 255 characters, and bytes are what every path
// (and the SQL function enqueue()) can count alike.
const maxFlowKeyLen = 255

// validateFlowKey checks a partition or sequence key: empty (none), or 1
// to maxFlowKeyLen bytes of text. what names the field.
func validateFlowKey(what, s string) error {
	if len(s) > maxFlowKeyLen {
		return fmt.Errorf("%s is %d bytes, limit %d", what, len(s), maxFlowKeyLen)
	}
	return validateText(what, s)
}

// validateJSONText refuses encoded JSON that the server's jsonb would
// refuse or that encoding/json altered: invalid UTF-8 (from a
// json.Marshaler), the escape \u0000 (jsonb has no NUL), and the escape
// \ufffd, which encoding/json writes only in place of invalid UTF-8 in a
// string (a genuine U+FFFD is written as itself).
func validateJSONText(what string, b []byte) error {
	if !utf8.Valid(b) {
		return fmt.Errorf("%s are not valid UTF-8", what)
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			continue
		}
		i++ // the escaped character: an escaped backslash starts nothing
		if b[i] != 'u' || i+4 >= len(b) {
			continue
		}
		switch strings.ToLower(string(b[i+1 : i+5])) {
		case "0000":
			return fmt.Errorf("%s hold a NUL character (\\u0000), which PostgreSQL's jsonb cannot store", what)
		case "fffd":
			return fmt.Errorf("%s hold a string that is not valid UTF-8", what)
		}
	}
	return nil
}

// validateRunAt refuses a RunAt outside the years every insert path
// stores exactly (UTC).
func validateRunAt(t time.Time) error {
	if y := t.UTC().Year(); y < minRunAtYear || y > maxRunAtYear {
		return fmt.Errorf("RunAt %s outside years %d to %d", t.UTC().Format(time.RFC3339Nano), minRunAtYear, maxRunAtYear)
	}
	return nil
}

// validateInsert checks the fields of p that Encode passes on as they
// are, so that every insert path refuses the same input with the same
// typed error instead of the server's untyped one, or altering it.
func validateInsert(p *Params, meta []byte) error {
	kind := p.Kind // ValidateKind checked it
	for _, tag := range p.Tags {
		if err := validateText("tag", tag); err != nil {
			return fmt.Errorf("%w option: enqueue %s: %w", pgqueuetype.ErrInvalid, kind, err)
		}
	}
	if err := validateText("SingletonKey", p.SingletonKey); err != nil {
		return fmt.Errorf("%w option: enqueue %s: %w", pgqueuetype.ErrInvalid, kind, err)
	}
	if err := validateFlowKey("PartitionKey", p.PartitionKey); err != nil {
		return fmt.Errorf("%w option: enqueue %s: %w", pgqueuetype.ErrInvalid, kind, err)
	}
	if err := validateFlowKey("SequenceKey", p.SequenceKey); err != nil {
		return fmt.Errorf("%w option: enqueue %s: %w", pgqueuetype.ErrInvalid, kind, err)
	}
	if !p.RunAt.IsZero() {
		if err := validateRunAt(p.RunAt); err != nil {
			return fmt.Errorf("%w option: enqueue %s: %w", pgqueuetype.ErrInvalid, kind, err)
		}
	}
	if err := validateJSONText("args", p.Args); err != nil {
		return fmt.Errorf("%w job args: enqueue %s: %w", pgqueuetype.ErrInvalid, kind, err)
	}
	if err := validateJSONText("meta", meta); err != nil {
		return fmt.Errorf("%w option: enqueue %s: %w", pgqueuetype.ErrInvalid, kind, err)
	}
	return nil
}

// pgMicros is t as PostgreSQL's binary timestamptz: microseconds since
// 2000-01-01 UTC, rounded down as pgx rounds a parameter, so COPY stores
// what a single insert stores. Exact for every year validateRunAt lets
// through; time.Duration would overflow beyond ±292 years of 2000.
func pgMicros(t time.Time) int64 {
	const unixToY2K = 946684800 * 1_000_000
	return t.Unix()*1_000_000 + int64(t.Nanosecond())/1000 - unixToY2K
}
