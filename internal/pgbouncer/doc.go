// Package pgbouncer starts a real PgBouncer (Debian's pgbouncer package) in
// transaction mode in front of a test server, so that tests see what a
// pooler does to sessions, prepared statements and notifications. It runs
// the configuration pgqueue ships (deploy/pgbouncer) as a template: only
// the listen address and port, the file paths, the user (in the auth file
// and as admin user) and the upstream server are replaced, so the tests
// run what users copy.
//
// Outside CI a machine without pgbouncer skips those tests, saying how to
// install it; under CI=true a missing pgbouncer fails them.
package pgbouncer
