// Package schemawatch notices, in a running client, a schema dropped or
// migrated down below the version the client needs (Start checked it
// once). The client's statements that run on their own (claims, polls,
// every maintenance task) share one Watch: instead of each failing and
// logging at every round on missing tables and functions, the Watch says
// so once, holds them back for longer each time (250 ms doubling to 4 s)
// and says so again when the schema is current.
//
// It imports pgqueuetype and the internal package schemaversion only.
package schemawatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/schemaversion"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

// Watch follows whether the schema is current, from the outcomes of the
// statements that report to it. A nil *Watch watches nothing. Set its
// exported fields; the zero value of the rest is ready. Safe for
// concurrent use.
type Watch struct {
	Pool *pgxpool.Pool
	// Schema is Config.Schema.
	Schema string
	Log    *slog.Logger

	mu      sync.Mutex
	err     error         // non-nil while the schema is outdated
	until   time.Time     // no statement before, while outdated
	backoff time.Duration // doubles from BackoffMin to BackoffMax
}

// The wait between two tries while the schema is outdated.
const (
	BackoffMin = 250 * time.Millisecond
	BackoffMax = 4 * time.Second
)

// Err returns nil while the schema is current (as far as the statements
// run so far showed), else an error wrapping ErrSchemaOutdated that says
// the version found and the one needed.
func (w *Watch) Err() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Blocked returns an error wrapping ErrSchemaOutdated while the watch
// holds statements back: the caller skips its round.
func (w *Watch) Blocked() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil && time.Now().Before(w.until) {
		return w.err
	}
	return nil
}

// Wait returns how long statements are still held back: zero when they
// are not.
func (w *Watch) Wait() time.Duration {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		return 0
	}
	return max(time.Until(w.until), 0)
}

// Observe takes a statement's outcome and returns the error its caller
// should handle. An error from a missing table, column, function or
// schema is checked against the schema's version: if the schema is older
// than needed (or gone), the error becomes one wrapping ErrSchemaOutdated,
// logged when the schema was current before, and statements wait. Any other error is returned as it is. Success while
// outdated reads the version again: once it is current, the watch says so
// and lets statements run.
func (w *Watch) Observe(ctx context.Context, err error) error {
	if w == nil {
		return err
	}
	if err == nil {
		w.mu.Lock()
		outdated := w.err != nil
		w.mu.Unlock()
		if outdated {
			w.recheck(ctx)
		}
		return nil
	}
	if !IsMissingObject(err) {
		return err
	}
	v, rerr := w.read(ctx)
	need := schemaversion.Latest()
	if rerr != nil || current(v, need) {
		return err // something else is missing: not a version matter
	}
	serr := fmt.Errorf("%w: schema %q at version %d, need %d", pgqueuetype.ErrSchemaOutdated, w.Schema, v.Version, need)
	w.mu.Lock()
	changed := w.err == nil
	w.err = serr
	w.wait(time.Now())
	w.mu.Unlock()
	if changed {
		w.Log.ErrorContext(ctx, "pgqueue: schema is older than this client needs: no claims or maintenance until it is migrated (pgqueue migrate up)",
			"schema", w.Schema, "version", v.Version, "migrated", v.Migrated, "dirty", v.Dirty, "need", need, "err", err)
	}
	return fmt.Errorf("%w: %w", serr, err)
}

// recheck reads the version after a statement worked while the schema
// was outdated: one that does not touch what is missing is no proof.
func (w *Watch) recheck(ctx context.Context) {
	v, err := w.read(ctx)
	if err != nil || !current(v, schemaversion.Latest()) {
		w.mu.Lock()
		w.wait(time.Now())
		w.mu.Unlock()
		return
	}
	// Said under the lock, before Err can report nil: whoever sees the
	// schema current again finds the line that says so already written.
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		w.Log.InfoContext(ctx, "pgqueue: schema is current again; claims and maintenance resume", "schema", w.Schema, "version", v.Version)
	}
	w.err, w.backoff, w.until = nil, 0, time.Time{}
}

// readTimeout bounds a read of the schema's version.
const readTimeout = 5 * time.Second

// read reads the schema's version.
func (w *Watch) read(ctx context.Context) (schemaversion.Version, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	return schemaversion.Read(ctx, w.Pool, w.Schema)
}

// wait holds statements back for the next backoff, unless they are held
// back already: several statements may fail at the end of one wait, and
// the wait grows once. w.mu is held.
func (w *Watch) wait(now time.Time) {
	if now.Before(w.until) {
		return
	}
	w.backoff = min(max(2*w.backoff, BackoffMin), BackoffMax)
	w.until = now.Add(w.backoff)
}

// current reports a version this binary's statements work on: a newer
// one is accepted, as Start does.
func current(v schemaversion.Version, need uint) bool {
	return v.Migrated && !v.Dirty && v.Version >= need
}

// IsMissingObject reports a statement that named a table, column,
// function or schema the database does not have.
func IsMissingObject(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case pgerrcode.UndefinedTable, pgerrcode.UndefinedColumn, pgerrcode.UndefinedFunction, pgerrcode.InvalidSchemaName:
		return true
	}
	return false
}
