package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/schemaversion"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// SchemaWatch notices, in a running client, a schema migrated down below
// the version the client needs (Start checked it once): instead of every
// claim failing and logging on missing columns and tables, it says so
// once and holds statements back, for longer each time, until the schema
// is migrated again. A nil *SchemaWatch watches nothing. Set its
// exported fields; the zero value of the rest is ready.
type SchemaWatch struct {
	Pool *pgxpool.Pool
	// Schema is Config.Schema.
	Schema string
	Log    *slog.Logger

	mu       sync.Mutex
	outdated bool
	until    time.Time     // no statement before, while outdated
	backoff  time.Duration // doubles from schemaBackoffMin to schemaBackoffMax
}

const (
	schemaBackoffMin = time.Second
	schemaBackoffMax = 30 * time.Second
)

// Blocked returns ErrSchemaOutdated while the watch holds statements
// back.
func (w *SchemaWatch) Blocked() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.outdated && time.Now().Before(w.until) {
		return fmt.Errorf("%w: schema %q: waiting for it to be migrated", pgqueuetype.ErrSchemaOutdated, w.Schema)
	}
	return nil
}

// Observe takes a statement's outcome. An error from a missing table,
// column, function or schema is checked against the schema's version: if
// the schema is older than needed, the error becomes ErrSchemaOutdated
// (logged the first time) and statements wait. Success after that ends
// the wait.
func (w *SchemaWatch) Observe(ctx context.Context, err error) error {
	if w == nil {
		return err
	}
	if err == nil {
		w.mu.Lock()
		was := w.outdated
		w.outdated, w.backoff = false, 0
		w.mu.Unlock()
		if was {
			w.Log.Info("pgqueue: schema migrated; claiming again", "schema", w.Schema)
		}
		return nil
	}
	if !isMissingObject(err) {
		return err
	}
	v, rerr := schemaversion.Read(ctx, w.Pool, w.Schema)
	need := schemaversion.Latest()
	if rerr != nil || (v.Migrated && !v.Dirty && v.Version >= need) {
		return err // something else is missing: not a version matter
	}
	w.mu.Lock()
	first := !w.outdated
	w.outdated = true
	w.backoff = min(max(2*w.backoff, schemaBackoffMin), schemaBackoffMax)
	w.until = time.Now().Add(w.backoff)
	w.mu.Unlock()
	if first {
		w.Log.Error("pgqueue: schema is older than this client needs: no claims until it is migrated (pgqueue migrate up)",
			"schema", w.Schema, "version", v.Version, "dirty", v.Dirty, "need", need, "err", err)
	}
	return fmt.Errorf("%w: schema %q at version %d, need %d: %w", pgqueuetype.ErrSchemaOutdated, w.Schema, v.Version, need, err)
}

// isMissingObject reports a statement that named a table, column,
// function or schema the database does not have.
func isMissingObject(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "42P01", "42703", "42883", "3F000": // undefined table, column, function; invalid schema
		return true
	}
	return false
}
