// Package maintenance owns the work one client per schema does for all:
// the Leader campaigns for the lease lock Lease and, while it leads, runs
// the tasks: the Scheduler (due scheduled jobs become available), the
// Rescuer (running jobs whose lease expired go back, under a new fence),
// the Pruner (finished jobs past their retention are deleted), the
// PeriodicEnqueuer (the periodic jobs' due runs) and the report of the
// queues' counts to the observer.
//
// Every task reports its statements' outcomes to the client's schema
// watch (internal/schemawatch) and its other failures to a failure log
// (watch.go): a schema dropped or the database down is a few lines, not
// one per round.
//
// It may import the standard library, pgx, pglock, pgqueuetype and the
// internal packages jobsql, dberr, loop and schemawatch; never the root
// package. What
// the root owns (the observer, the retry policy, the periodic jobs' public
// types and the enqueue path) comes in as functions and small interfaces.
//
// A new task is a file <task>.go here with a type whose Run ends with its
// context (the term), and a field of Leader.
package maintenance

import "github.com/pgqueue/pgqueue/internal/dberr"

// dbError wraps a database error of op as the root package does.
func dbError(op string, err error) error { return dberr.Wrap("pgqueue", op, err) }
