// Package pgqueuetest helps test code that enqueues and works pgqueue
// jobs, against a real PostgreSQL, without writing SQL.
//
// A test binary gets a server the way pgqueue's own tests do: Main, from
// TestMain, uses DATABASE_URL when it is set (its role must be allowed to
// CREATE DATABASE), else starts a throwaway server from the local
// PostgreSQL binaries (in a checkout of pgqueue only, it then tries a
// container through testcontainers-go when Docker answers; see
// docs/guides/testing.md for Docker in your module). It migrates
// pgqueue's schema (and runs your own setup) in one template database;
// NewPool gives each test a clone of it, dropped when the test ends:
//
//	func TestMain(m *testing.M) { os.Exit(pgqueuetest.Main(m, nil)) }
//
//	func TestSignup(t *testing.T) {
//		t.Parallel()
//		pool := pgqueuetest.NewPool(t)
//		...
//	}
//
// RequireEnqueued, RequireEnqueuedN and RequireNotEnqueued check what a
// test or a transaction enqueued: jobs of a kind, matched by a subset of
// their args and by their options (queue, priority, scheduled time, max
// attempts, tags, uniqueness, state). Pass the transaction to see what it
// wrote before it commits.
//
// Work and WorkJob run one job synchronously through its real handler, the
// client's middleware and error handler, its real claim (a fence token, a
// job context for ClientFromContext, RecordOutput and CompleteTx) and the
// statement that writes its result, and return what became of it:
// completed, retried with which error, discarded, snoozed or cancelled.
// The client need not be started.
//
// The package is in the core module: it needs nothing the core does not
// (pgx), adds nothing to your go.mod or go.sum, and only test binaries
// link it. See docs/guides/testing.md.
package pgqueuetest
