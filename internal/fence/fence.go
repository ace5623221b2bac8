// Package fence runs the fence check (<schema>.check_fence) with its wait
// for the fence row's lock bounded. A holder stalled inside its
// transaction, after its own check and before its commit, holds that row
// lock; without a bound the next holder's check would wait for it as long
// as the stalled transaction stays open. pgqueue's CheckFenceTx and
// pglock's share it.
package fence

import (
	"context"
	"embed"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

var saveSQL, setSQL, restoreSQL = mustRead("save_lock_timeout"), mustRead("set_lock_timeout"), mustRead("restore_lock_timeout")

func mustRead(name string) string {
	b, err := sqlFiles.ReadFile("sql/" + name + ".sql")
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Check runs checkSQL (check_fence, its schema filled in) in tx with
// resource and token. A non-negative timeout bounds the check's wait for
// the fence row's lock: the transaction's lock_timeout is saved, set to
// timeout for the check and put back after it, so the caller's own
// setting holds for its later statements; the four statements go in one
// batch, one round trip. A negative timeout runs the check alone, under
// whatever lock_timeout the session has.
//
// When the bound (or the session's own lock_timeout) ends the wait, Check
// returns the server's error, for which IsBusy reports true; tx is
// aborted then, as after any failed statement.
func Check(ctx context.Context, tx pgx.Tx, checkSQL, resource string, token int64, timeout time.Duration) error {
	if timeout < 0 {
		_, err := tx.Exec(ctx, checkSQL, resource, token)
		return err
	}
	b := &pgx.Batch{}
	b.Queue(saveSQL)
	b.Queue(setSQL, lockTimeout(timeout))
	b.Queue(checkSQL, resource, token)
	b.Queue(restoreSQL)
	br := tx.SendBatch(ctx, b)
	var err error
	for range b.Len() {
		// After a failure the rest fail as aborted: the first error is the
		// one to report.
		if _, e := br.Exec(); err == nil {
			err = e
		}
	}
	return errors.Join(err, closeUnlessFailed(br, err))
}

// closeUnlessFailed closes the batch's results, returning Close's error
// only when no statement failed (it repeats a statement's error).
func closeUnlessFailed(br pgx.BatchResults, failed error) error {
	err := br.Close()
	if failed != nil {
		return nil
	}
	return err
}

// lockTimeout renders d as a lock_timeout value in milliseconds, at least
// 1ms: 0 would mean no bound at all.
func lockTimeout(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms"
}

// IsBusy reports whether err is a lock wait that lock_timeout ended
// (SQLSTATE 55P03): another transaction held the fence row all along.
func IsBusy(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgerrcode.LockNotAvailable
}
