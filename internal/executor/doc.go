// Package executor owns running claimed jobs: the executor gives each job
// its context, timeout and middleware, runs its handler (under its
// singleton lock, if any), turns the outcome into a result for the
// completer, and keeps the registry of running jobs that heartbeats renew,
// the expiry sweep and control messages cancel, and the job context
// handlers read back.
//
// It may import pgqueuetype, pglock and the internal packages below it
// (jobsql, dberr, completer). What the client hands down comes as plain
// values in Config: the public interfaces it calls (RetryPolicy,
// WorkMiddleware, ErrorHandler) are mirrored here by interfaces with the
// same methods, and the client itself is an opaque Owner.
package executor
