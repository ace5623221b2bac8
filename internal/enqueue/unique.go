package enqueue

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// Unique is what a unique job is unique by: the root's UniqueOpts, field
// for field (see there), so that a *UniqueOpts converts to a *Unique
// without a copy.
type Unique struct {
	// ByKey adds a key of the caller's to the kind.
	ByKey string
	// ByArgs adds the encoded args, or with ByArgsFields those top-level
	// fields.
	ByArgs bool
	// ByArgsFields limits ByArgs to these top-level fields.
	ByArgsFields []string
	// ByQueue adds the queue.
	ByQueue bool
	// ByPeriod, when positive, allows one job per period of run_at.
	ByPeriod time.Duration
	// ByState are the states in which an equal job blocks a new one;
	// empty means every state but cancelled and discarded.
	ByState []pgqueuetype.JobState
}

// defaultUniqueStates is Unique.ByState's default.
var defaultUniqueStates = []pgqueuetype.JobState{
	pgqueuetype.StateScheduled, pgqueuetype.StateAvailable, pgqueuetype.StateRunning, pgqueuetype.StateCompleted,
}

// uniqueKey is what an insert needs to write a unique job: the hash of
// what the job is unique by, the period, and the states. The period number
// is added by the SQL function unique_key, with the database clock.
type uniqueKey struct {
	base     []byte
	periodUS int64
	states   []string
}

// uniqueKeyVersion starts every hashed key: a change to what goes into a
// key changes it, so old and new keys never match by accident.
const uniqueKeyVersion = "pgqueue-unique-1"

// newUniqueKey validates u and hashes kind, queue and args as u asks.
func newUniqueKey(u *Unique, kind, queue string, args []byte) (*uniqueKey, error) {
	if u.ByPeriod < 0 || (u.ByPeriod > 0 && u.ByPeriod < time.Microsecond) {
		return nil, fmt.Errorf("%w option: enqueue %s: Unique.ByPeriod %s out of range", pgqueuetype.ErrInvalid, kind, u.ByPeriod)
	}
	states, err := uniqueStates(u.ByState)
	if err != nil {
		return nil, fmt.Errorf("%w option: enqueue %s: %w", pgqueuetype.ErrInvalid, kind, err)
	}
	h := sha256.New()
	write := func(part string, b []byte) {
		// Each part is named and length-prefixed, so no two different
		// keys hash the same bytes.
		fmt.Fprintf(h, "%s:%d:", part, len(b))
		h.Write(b)
	}
	write("version", []byte(uniqueKeyVersion))
	write("kind", []byte(kind))
	if u.ByKey != "" {
		write("key", []byte(u.ByKey))
	}
	if u.ByQueue {
		write("queue", []byte(queue))
	}
	if u.ByArgs {
		canonical, err := canonicalArgs(args, u.ByArgsFields)
		if err != nil {
			return nil, fmt.Errorf("%w option: enqueue %s: Unique.ByArgs: %w", pgqueuetype.ErrInvalid, kind, err)
		}
		write("args", canonical)
	}
	return &uniqueKey{base: h.Sum(nil), periodUS: u.ByPeriod.Microseconds(), states: states}, nil
}

// uniqueStates validates a state set and returns it as text, defaults
// applied.
func uniqueStates(set []pgqueuetype.JobState) ([]string, error) {
	if len(set) == 0 {
		set = defaultUniqueStates
	}
	out := make([]string, 0, len(set))
	for _, s := range set {
		switch s {
		case pgqueuetype.StateScheduled, pgqueuetype.StateAvailable, pgqueuetype.StateRunning,
			pgqueuetype.StateCompleted, pgqueuetype.StateCancelled, pgqueuetype.StateDiscarded:
		default:
			return nil, fmt.Errorf("unique states: unknown state %q", s)
		}
		if !slices.Contains(out, string(s)) {
			out = append(out, string(s))
		}
	}
	for _, must := range []pgqueuetype.JobState{pgqueuetype.StateScheduled, pgqueuetype.StateAvailable, pgqueuetype.StateRunning} {
		if !slices.Contains(out, string(must)) {
			return nil, fmt.Errorf("unique states must hold %s, %s and %s, got %v",
				pgqueuetype.StateScheduled, pgqueuetype.StateAvailable, pgqueuetype.StateRunning, set)
		}
	}
	slices.Sort(out)
	return out, nil
}

// canonicalArgs re-encodes JSON args with object keys sorted and no white
// space, keeping numbers as written, so equal args give equal bytes. With
// fields, only those top-level fields are kept; a missing one is null.
func canonicalArgs(args []byte, fields []string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if len(fields) > 0 {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("unique args fields need args that encode as a JSON object")
		}
		picked := make(map[string]any, len(fields))
		for _, f := range fields {
			picked[f] = obj[f]
		}
		v = picked
	}
	return json.Marshal(v) // maps marshal with sorted keys
}
