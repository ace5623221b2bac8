package schemawatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/internal/schemaversion"
	"github.com/pgqueue/pgqueue/pgqueuetype"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, nil)) }

// recorder keeps the messages logged through it. For the recovery line it
// also notes what the watch looked like as the line was written: whether
// its error was still set and its lock held.
type recorder struct {
	w *Watch

	mu       sync.Mutex
	messages []string
	// errSetAtRecovery, lockedAtRecovery: at the "current again" line.
	errSetAtRecovery, lockedAtRecovery bool
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.messages = append(r.messages, rec.Message)
	if strings.Contains(rec.Message, "current again") {
		// Logged by the goroutine that holds w.mu, if it is held: w.err is
		// then safe to read here.
		r.lockedAtRecovery = !r.w.mu.TryLock()
		if !r.lockedAtRecovery {
			r.w.mu.Unlock()
		}
		r.errSetAtRecovery = r.w.err != nil
	}
	return nil
}

func (r *recorder) count(part string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.messages {
		if strings.Contains(m, part) {
			n++
		}
	}
	return n
}

// A schema found outdated is said once and holds statements back; when
// it is current again the watch says so, and only then lets them run: a
// caller that sees Err return nil finds the recovery line written.
func TestWatchOutdatedThenCurrent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtest.DB().NewPool(t)
	if _, err := pool.Exec(ctx, "CREATE SCHEMA watched"); err != nil {
		t.Fatal(err)
	}
	w := &Watch{Pool: pool, Schema: "watched"}
	rec := &recorder{w: w}
	w.Log = slog.New(rec)

	missing := &pgconn.PgError{Code: pgerrcode.UndefinedTable, Message: `relation "watched.jobs" does not exist`}
	other := errors.New("connection reset")
	if got := w.Observe(ctx, other); got != other {
		t.Fatalf("Observe(%v) = %v, want it unchanged", other, got)
	}
	for range 3 { // every claim and task of the client may fail so
		got := w.Observe(ctx, fmt.Errorf("claim: %w", missing))
		if !errors.Is(got, pgqueuetype.ErrSchemaOutdated) || !errors.Is(got, missing) {
			t.Fatalf("Observe(missing table) = %v, want ErrSchemaOutdated wrapping it", got)
		}
	}
	if n := rec.count("older than this client needs"); n != 1 {
		t.Fatalf("the outdated schema was logged %d times, want once", n)
	}
	if w.Err() == nil || w.Blocked() == nil || w.Wait() <= 0 {
		t.Fatalf("outdated: Err %v, Blocked %v, Wait %v; want an error, an error and a wait", w.Err(), w.Blocked(), w.Wait())
	}
	// A statement that worked while the schema is still outdated proves
	// nothing.
	if err := w.Observe(ctx, nil); err != nil || w.Err() == nil {
		t.Fatalf("still outdated after a success: Observe %v, Err %v", err, w.Err())
	}

	if _, err := pool.Exec(ctx, "CREATE TABLE watched.schema_migrations (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO watched.schema_migrations VALUES ($1, false)", int64(schemaversion.Latest())); err != nil {
		t.Fatal(err)
	}
	if err := w.Observe(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Err(); err != nil || w.Blocked() != nil || w.Wait() != 0 {
		t.Fatalf("current again: Err %v, Blocked %v, Wait %v; want none", err, w.Blocked(), w.Wait())
	}
	if n := rec.count("current again"); n != 1 {
		t.Fatalf("the recovery was logged %d times, want once", n)
	}
	if !rec.lockedAtRecovery || !rec.errSetAtRecovery {
		t.Errorf("the recovery line was written with the lock held %v and the error still set %v; want both, so that no caller sees Err nil before the line",
			rec.lockedAtRecovery, rec.errSetAtRecovery)
	}
}
