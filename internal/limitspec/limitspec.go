// Package limitspec is the text form of a queue's flow limits that the CLI
// (pgqueue queues limit) and the dashboard share, so that an operator
// types and reads them the same way in both: a rate as "100/1m", a
// partition key as "kind,args.customer_id". It works on plain values: no
// package under internal/ imports the root, where QueueLimits lives.
package limitspec

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxArgsFields is how many args fields a partition key may name: the
// root's limit (flow_key in migration 10 reads four), checked here too so
// that the error names the operator's syntax rather than Go fields.
const MaxArgsFields = 4

// units are the bare units a period may be given as: "10/s" is ten a
// second.
var units = map[string]time.Duration{
	"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour,
}

// ParsePeriod reads a rate's period: a Go duration ("1m", "1m30s",
// "500ms") or a bare unit ("s", "m", "h", "ms"), at least a millisecond.
func ParsePeriod(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, ok := units[s]; ok {
		return d, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("period %q is not a duration such as 1s, 1m, 1h or 500ms", s)
	}
	if d < time.Millisecond {
		return 0, fmt.Errorf("period %q is under a millisecond", s)
	}
	return d, nil
}

// FormatPeriod writes d the way ParsePeriod reads it, without the zero
// units time.Duration's String adds: "1m", not "1m0s".
func FormatPeriod(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ParseRate reads a rate limit written LIMIT/PERIOD: "100/1m" is at most
// 100 starts within any minute. LIMIT is at least 1.
func ParseRate(s string) (limit int, period time.Duration, err error) {
	n, p, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, 0, fmt.Errorf("rate %q is not LIMIT/PERIOD, such as 100/1m or 10/s", s)
	}
	limit, err = strconv.Atoi(strings.TrimSpace(n))
	if err != nil || limit < 1 {
		return 0, 0, fmt.Errorf("rate %q: the limit must be a whole number of at least 1", s)
	}
	if period, err = ParsePeriod(p); err != nil {
		return 0, 0, fmt.Errorf("rate %q: %w", s, err)
	}
	return limit, period, nil
}

// FormatRate writes a rate the way ParseRate reads it.
func FormatRate(limit int, period time.Duration) string {
	return strconv.Itoa(limit) + "/" + FormatPeriod(period)
}

// argsPrefix marks an args field in a partition key.
const argsPrefix = "args."

// ParsePartitionBy reads what a partition key is derived from: a
// comma-separated list of "kind" and "args.FIELD" (a top-level field of
// the args; everything after "args." is its name). The empty string is
// none. Each item may appear once, and at most MaxArgsFields fields.
func ParsePartitionBy(s string) (kind bool, fields []string, err error) {
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
			continue
		case item == "kind":
			if kind {
				return false, nil, errors.New("partition key names kind twice")
			}
			kind = true
		case strings.HasPrefix(item, argsPrefix) && len(item) > len(argsPrefix):
			f := item[len(argsPrefix):]
			if slices.Contains(fields, f) {
				return false, nil, fmt.Errorf("partition key names %s twice", item)
			}
			fields = append(fields, f)
		default:
			return false, nil, fmt.Errorf("partition key item %q is neither kind nor args.FIELD", item)
		}
	}
	if len(fields) > MaxArgsFields {
		return false, nil, fmt.Errorf("partition key names %d args fields, at most %d", len(fields), MaxArgsFields)
	}
	return kind, fields, nil
}

// FormatPartitionBy writes a partition key's parts the way
// ParsePartitionBy reads them; "" for none.
func FormatPartitionBy(kind bool, fields []string) string {
	items := make([]string, 0, len(fields)+1)
	if kind {
		items = append(items, "kind")
	}
	for _, f := range fields {
		items = append(items, argsPrefix+f)
	}
	return strings.Join(items, ",")
}
