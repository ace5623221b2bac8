package pglock

import (
	"cmp"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/sqlschema"
	"github.com/pgqueue/pgqueue/internal/warnlog"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

// Config configures a Locker. A nil *Config means the defaults.
type Config struct {
	// Schema is the schema holding pgqueue's tables (fence_seq, leases,
	// fences), as created by pgqueue.Migrate. It also keeps the advisory
	// keys of two schemas apart. Default "pgqueue".
	Schema string

	// Logger receives the elector's logs. Default: the warnings and errors
	// only, to slog.Default(); Logger: slog.Default() logs Info too.
	Logger *slog.Logger

	// DirectConnConfig, when set, is what session locks dial: a connection
	// to PostgreSQL itself, for when the pool goes through a pooler such
	// as PgBouncer, where session locks are refused (ErrNoSessionAffinity).
	// Default: the pool's ConnConfig. It is copied; the lock checks that
	// it reaches PostgreSQL directly every time it dials.
	DirectConnConfig *pgx.ConnConfig

	// FenceLockTimeout bounds how long the Locker's CheckFenceTx waits for
	// the fence row's lock, which an earlier holder keeps until its
	// transaction ends; past it CheckFenceTx returns ErrFenceBusy.
	// Default DefaultFenceLockTimeout; negative means no bound.
	FenceLockTimeout time.Duration
}

// DefaultFenceLockTimeout is the bound of CheckFenceTx's wait for the
// fence row's lock: Config.FenceLockTimeout's default, and the bound of
// the package's free CheckFenceTx.
const DefaultFenceLockTimeout = 5 * time.Second

// Locker takes locks in one schema through one pool. It holds no state of
// its own beyond the prepared statement texts, so it is safe for
// concurrent use and cheap to create.
type Locker struct {
	pool   *pgxpool.Pool
	direct *pgx.ConnConfig // Config.DirectConnConfig, copied
	schema string
	log    *slog.Logger
	q      queries
	// fenceLockTimeout is Config.FenceLockTimeout with its default.
	fenceLockTimeout time.Duration
}

// queries holds every statement of sql/, with the schema filled in.
type queries struct {
	xactLock, tryXactLock, sessionLock, trySessionLock, sessionUnlock string
	backendPID, leaseAcquire, leaseRenew, leaseRelease                string
}

// New returns a Locker on pool for the schema of config. It does not touch
// the database; the schema must have been created with pgqueue.Migrate.
func New(pool *pgxpool.Pool, config *Config) (*Locker, error) {
	if pool == nil {
		return nil, ErrNilPool
	}
	var c Config
	if config != nil {
		c = *config
	}
	l := &Locker{pool: pool, schema: cmp.Or(c.Schema, sqlschema.Default), log: c.Logger,
		fenceLockTimeout: cmp.Or(c.FenceLockTimeout, DefaultFenceLockTimeout)}
	if l.log == nil {
		l.log = warnlog.Default()
	}
	if c.DirectConnConfig != nil {
		l.direct = c.DirectConnConfig.Copy()
	}
	q := &l.q
	if err := sqlschema.Load(sqlFiles, "sql", l.schema, map[string]*string{
		"xact_lock": &q.xactLock, "try_xact_lock": &q.tryXactLock,
		"session_lock": &q.sessionLock, "try_session_lock": &q.trySessionLock, "session_unlock": &q.sessionUnlock,
		"backend_pid":   &q.backendPID,
		"lease_acquire": &q.leaseAcquire, "lease_renew": &q.leaseRenew, "lease_release": &q.leaseRelease,
	}); err != nil {
		return nil, err
	}
	return l, nil
}

// sessionConnConfig returns what a session lock dials: a copy of
// Config.DirectConnConfig, or of the pool's ConnConfig.
func (l *Locker) sessionConnConfig() *pgx.ConnConfig {
	if l.direct != nil {
		return l.direct.Copy()
	}
	return l.pool.Config().ConnConfig.Copy()
}

// Schema returns the schema the locker works in.
func (l *Locker) Schema() string { return l.schema }

// defaultHolder names this process: host name, process id and a random
// suffix.
func defaultHolder() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", cmp.Or(host, "host"), os.Getpid(), hex.EncodeToString(b[:]))
}
