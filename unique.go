package pgqueue

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// UniqueOpts makes a job unique: while a job with the same key exists in
// one of the states ByState names, inserting another is not an error but a
// duplicate: Enqueue returns the existing job with Duplicate set, and
// EnqueueMany skips it and says which. The database enforces it with a
// unique index, so inserts racing from many processes leave exactly one
// job.
//
// The key is always the job's kind, plus what the fields ask for. The zero
// UniqueOpts makes a job unique by kind alone.
type UniqueOpts struct {
	// ByKey adds a key of your own: jobs of one kind with equal keys are
	// equal. It is the unique_key of the SQL function enqueue(), so a job
	// enqueued from Go and one enqueued from SQL with the same kind, key
	// and period are duplicates of each other (when neither sets more).
	ByKey string
	// ByArgs adds the job's encoded args to the key: all of them, or with
	// ByArgsFields only those top-level fields. Field order and white
	// space in the encoding do not matter.
	ByArgs bool
	// ByArgsFields, with ByArgs, limits the args in the key to these
	// top-level JSON fields (as named in the encoding); a missing field
	// counts as null. The args must then encode as a JSON object.
	ByArgsFields []string
	// ByQueue adds the job's queue to the key.
	ByQueue bool
	// ByPeriod, when positive, allows one job per period: the key holds
	// the number of the period that holds the job's run_at (now, by the
	// database clock, when RunAt is zero), counting periods from the Unix
	// epoch in UTC. Use time.Hour for one per hour, 24*time.Hour for one
	// per UTC day. At least a microsecond.
	ByPeriod time.Duration
	// ByState is the set of states in which an existing job counts as a
	// duplicate. Default: every state but cancelled and discarded, so a
	// completed job still blocks its period. It must hold scheduled,
	// available and running (the states a job moves between by itself),
	// so only final states can be left out.
	ByState []JobState
}

// defaultUniqueStates is UniqueOpts.ByState's default.
var defaultUniqueStates = []JobState{StateScheduled, StateAvailable, StateRunning, StateCompleted}

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
func newUniqueKey(u *UniqueOpts, kind, queue string, args []byte) (*uniqueKey, error) {
	if u.ByPeriod < 0 || (u.ByPeriod > 0 && u.ByPeriod < time.Microsecond) {
		return nil, fmt.Errorf("%w option: enqueue %s: Unique.ByPeriod %s out of range", ErrInvalid, kind, u.ByPeriod)
	}
	states, err := uniqueStates(u.ByState)
	if err != nil {
		return nil, fmt.Errorf("%w option: enqueue %s: %w", ErrInvalid, kind, err)
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
			return nil, fmt.Errorf("%w option: enqueue %s: Unique.ByArgs: %w", ErrInvalid, kind, err)
		}
		write("args", canonical)
	}
	return &uniqueKey{base: h.Sum(nil), periodUS: u.ByPeriod.Microseconds(), states: states}, nil
}

// uniqueStates validates a state set and returns it as text, defaults
// applied.
func uniqueStates(set []JobState) ([]string, error) {
	if len(set) == 0 {
		set = defaultUniqueStates
	}
	out := make([]string, 0, len(set))
	for _, s := range set {
		switch s {
		case StateScheduled, StateAvailable, StateRunning, StateCompleted, StateCancelled, StateDiscarded:
		default:
			return nil, fmt.Errorf("unique states: unknown state %q", s)
		}
		if !slices.Contains(out, string(s)) {
			out = append(out, string(s))
		}
	}
	for _, must := range []JobState{StateScheduled, StateAvailable, StateRunning} {
		if !slices.Contains(out, string(must)) {
			return nil, fmt.Errorf("unique states must hold %s, %s and %s, got %v", StateScheduled, StateAvailable, StateRunning, set)
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
