// Package pgsession tells whether a connection reaches PostgreSQL directly,
// with a session of its own, or through a pooler that shares backends
// between clients.
//
// The test is the backend key. At start-up PostgreSQL sends each session
// its backend's process id (BackendKeyData, for cancel requests). A pooler
// that moves a client between backends cannot forward one backend's key: a
// cancel must reach whichever backend runs the client's statement, so the
// pooler hands out a key of its own and routes cancels itself (PgBouncer,
// Odyssey, PgCat and Supavisor all do). On a direct connection the key's
// process id is the pid pg_backend_pid() answers; through such a pooler it
// is not, whether or not the pool happens to be idle. A pooler in session
// mode fails the test too: it may be correct there, but nothing in the
// protocol tells it apart, and refusing is the safe answer.
package pgsession

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

//go:embed sql/backend_pid.sql
var backendPIDQuery string

// ErrPooled is returned by Check when the connection goes through a pooler.
var ErrPooled = errors.New("connection goes through a pooler: the backend is not the one the session started on")

// Check returns nil when conn is a direct session of PostgreSQL, an error
// wrapping ErrPooled when it goes through a pooler, or the error of the
// statement. The statement runs in simple protocol, which every pooler
// passes through whatever the connection's exec mode.
func Check(ctx context.Context, conn *pgx.Conn) error {
	pid, err := BackendPID(ctx, conn)
	if err != nil {
		return err
	}
	if key := conn.PgConn().PID(); uint32(pid) != key {
		return fmt.Errorf("%w (backend %d answers, session key %d)", ErrPooled, pid, key)
	}
	return nil
}

// BackendPID returns the pid of the backend that answers on conn now.
func BackendPID(ctx context.Context, conn *pgx.Conn) (int32, error) {
	var pid int32
	err := conn.QueryRow(ctx, backendPIDQuery, pgx.QueryExecModeSimpleProtocol).Scan(&pid)
	return pid, err
}

// PoolerSafe reports whether pgx runs every statement in mode, batches
// included, without relying on a prepared statement surviving from one
// round trip to the next: cache_statement prepares named statements that
// live in one backend, describe_exec binds the unnamed statement it
// described in an earlier round trip; a pooler in transaction mode may
// run the next round trip in another backend.
func PoolerSafe(mode pgx.QueryExecMode) bool {
	switch mode {
	case pgx.QueryExecModeCacheDescribe, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol:
		return true
	}
	return false
}
