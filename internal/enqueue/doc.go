// Package enqueue owns putting jobs in: it validates and encodes a job
// (kind, queue name, options, args and meta as JSON, unique keys), and
// writes jobs with their NOTIFY through the caller's connection or
// transaction: one job in one round trip, small batches as one statement,
// batches with unique jobs in chunks, large batches as a binary COPY
// encoded while the server reads it.
//
// The root package keeps the public API (Client.Enqueue and friends, the
// options, the enqueue middleware) and hands jobs down as Params. This
// package imports pgqueuetype, internal/jobsql and internal/dberr, never
// the root package.
package enqueue
