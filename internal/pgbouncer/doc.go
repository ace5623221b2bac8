// Package pgbouncer starts a real PgBouncer (Debian's pgbouncer package) in
// transaction mode in front of a test server, so that tests see what a
// pooler does to sessions, prepared statements and notifications.
//
// Outside CI a machine without pgbouncer skips those tests, saying how to
// install it; under CI=true a missing pgbouncer fails them.
package pgbouncer
