package pglock

import "hash/fnv"

// Key is the advisory lock a name maps to. pglock uses PostgreSQL's
// two-key form, pg_advisory_lock(int4, int4), whose key space is separate
// from the one-bigint form that golang-migrate and most applications use:
// Class is derived from "pgqueue:" and the schema, so two schemas never
// share a lock, and Object from the name. Both are the low 32 bits of FNV-1a
// hashes, kept stable across releases since they decide which sessions
// exclude each other. Two names of one schema share a key with probability
// 2^-32; that makes them exclude each other, never lets two holders of one
// name in.
type Key struct {
	Class  int32
	Object int32
}

// Int64 returns the key as one 64-bit number, Class in the high half, the
// way pg_locks shows it (classid, objid).
func (k Key) Int64() int64 { return int64(k.Class)<<32 | int64(uint32(k.Object)) }

// Key returns the advisory key name maps to in the locker's schema.
func (l *Locker) Key(name string) Key {
	return Key{Class: hash32("pgqueue:" + l.schema), Object: hash32(name)}
}

func hash32(s string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return int32(h.Sum32())
}
