// Package pgserver runs private, throwaway PostgreSQL servers from the
// local server binaries (initdb and postgres on PATH, under
// `pg_config --bindir`, or the highest version in /usr/lib/postgresql/*/bin),
// in a temporary directory (or in memory: Options.InMemory), on a free
// port of 127.0.0.1, with fsync off. As
// root it runs them as the postgres OS user, since initdb and postgres
// refuse root.
//
// Fault tests stop a Server with StopImmediate and start it again; the
// pgqueue CLI's demo and bench use one when no database is given. It does
// not import testing, so binaries may link it.
package pgserver
