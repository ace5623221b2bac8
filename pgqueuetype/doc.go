// Package pgqueuetype holds the basic types of pgqueue that both the
// public API and its machinery use: the job row and its states, the
// history of attempt errors, the args interface, how an attempt ended,
// and the errors the machinery returns.
//
// It imports nothing of pgqueue, so the internal packages that claim, run,
// complete and maintain jobs can share these types without importing the
// root package. Package pgqueue re-exports every name here as an alias
// (pgqueue.JobRow is pgqueuetype.JobRow): most programs never import this
// package themselves.
package pgqueuetype
