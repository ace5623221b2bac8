package pgqueue

import "time"

// UniqueOpts makes a job unique: while a job with the same key exists in
// one of the states ByState names, inserting another is not an error but a
// duplicate: Enqueue always returns the existing job with Duplicate set, and
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
