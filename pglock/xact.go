package pglock

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// LockXact waits, as long as ctx allows, for the advisory lock of name on
// tx's transaction, and returns a fence token for this acquisition that is
// higher than every earlier one. The lock is released when tx commits or
// rolls back, or when its connection dies.
func (l *Locker) LockXact(ctx context.Context, tx pgx.Tx, name string) (fence int64, err error) {
	k := l.Key(name)
	if err := tx.QueryRow(ctx, l.q.xactLock, k.Class, k.Object).Scan(&fence); err != nil {
		awaitServerSide(tx.Conn().PgConn())
		return 0, dbError(fmt.Sprintf("xact lock %q", name), err)
	}
	return fence, nil
}

// TryLockXact takes the advisory lock of name on tx's transaction if it is
// free, with a fence token, or returns ErrBusy at once.
func (l *Locker) TryLockXact(ctx context.Context, tx pgx.Tx, name string) (fence int64, err error) {
	k := l.Key(name)
	var got bool
	var f *int64
	if err := tx.QueryRow(ctx, l.q.tryXactLock, k.Class, k.Object).Scan(&got, &f); err != nil {
		return 0, dbError(fmt.Sprintf("try xact lock %q", name), err)
	}
	if !got {
		return 0, fmt.Errorf("xact lock %q: %w", name, ErrBusy)
	}
	return *f, nil
}

// abandonedWaitGrace bounds how long a lock call whose wait ctx ended waits
// more for the server to end that wait.
const abandonedWaitGrace = time.Second

// awaitServerSide waits, at most abandonedWaitGrace, until the session of a
// connection pgx closed is gone from the server. When ctx ends a lock wait,
// pgx closes the connection in the background, sending a cancel request;
// until the server acts on it the session still waits, and may be granted
// the lock after the caller was told it did not get it.
func awaitServerSide(pc *pgconn.PgConn) {
	if !pc.IsClosed() {
		return
	}
	t := time.NewTimer(abandonedWaitGrace)
	defer t.Stop()
	select {
	case <-pc.CleanupDone():
	case <-t.C:
	}
}
