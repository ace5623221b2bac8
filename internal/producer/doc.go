// Package producer owns claiming jobs: one producer per queue claims jobs
// up to its free worker slots (and, with a backlog, ahead of them) with
// sql/claim.sql and hands each to an executor goroutine; a poller finds
// queues with work that no notification announced and tells the
// maintenance elector when its lease is free; the client's schema watch
// (internal/schemawatch) holds claims and polls back while the schema is
// older than this client needs.
//
// It may import pgqueuetype, internal/executor (whose Executor runs the
// jobs it claims) and the internal packages below them (jobsql, dberr,
// loop, schemawatch). What the client hands down comes in plain fields:
// the lookup of a kind's worker, the maintenance lease's name, the
// observer's Claimed.
package producer
