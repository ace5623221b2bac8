package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgqueue/pgqueue/internal/fence"
	"github.com/pgqueue/pgqueue/internal/sqlschema"
)

// staleFenceCode is the SQLSTATE <schema>.check_fence raises for a stale
// token.
const staleFenceCode = "PQF01"

// CheckFenceTx records token as the highest fence token seen for resource
// in schema's fences table, inside tx, or returns ErrStaleFence when a
// higher token was recorded already. Make the write to resource in the same
// tx: the check locks resource's fence row until tx ends, so a stale holder
// can neither pass the check nor slip a write in after a newer holder's.
// Equal tokens pass, so one holder may write many times.
//
// It needs only a transaction and the schema pgqueue.Migrate created, not
// a Locker or a pgqueue.Client, so a holder of a lock from any backend
// (file, Redis, etcd) can fence its writes to PostgreSQL with the lock's
// token. Tokens of different locks are not comparable: fence each resource
// with the tokens of one lock. schema "" means the default, "pgqueue".
//
// The wait for that row lock, which an earlier holder keeps until its
// transaction ends, is bounded by DefaultFenceLockTimeout (a Locker's
// CheckFenceTx by its Config.FenceLockTimeout): past it CheckFenceTx
// returns ErrFenceBusy, and tx must be rolled back.
func CheckFenceTx(ctx context.Context, tx pgx.Tx, schema, resource string, token int64) error {
	return checkFenceTx(ctx, tx, schema, resource, token, DefaultFenceLockTimeout)
}

func checkFenceTx(ctx context.Context, tx pgx.Tx, schema, resource string, token int64, timeout time.Duration) error {
	if schema == "" {
		schema = sqlschema.Default
	}
	if err := sqlschema.Validate(schema); err != nil {
		return err
	}
	if err := fence.Check(ctx, tx, sqlschema.Fill(checkFenceSQL, schema), resource, token, timeout); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == staleFenceCode {
			return fmt.Errorf("check fence %q token %d: %w (%w)", resource, token, ErrStaleFence, err)
		}
		if fence.IsBusy(err) {
			return fmt.Errorf("check fence %q token %d: another transaction held the fence row for %s: %w (%w)", resource, token, timeout, ErrFenceBusy, err)
		}
		return dbError(fmt.Sprintf("check fence %q", resource), err)
	}
	return nil
}

// CheckFenceTx is the package's CheckFenceTx in the locker's schema, its
// wait bounded by the locker's Config.FenceLockTimeout.
func (l *Locker) CheckFenceTx(ctx context.Context, tx pgx.Tx, resource string, token int64) error {
	return checkFenceTx(ctx, tx, l.schema, resource, token, l.fenceLockTimeout)
}

// checkFenceSQL is sql/check_fence.sql, read once; the schema is filled in
// per call, as the free CheckFenceTx has no Locker to keep it in.
var checkFenceSQL = func() string {
	b, err := sqlFiles.ReadFile("sql/check_fence.sql")
	if err != nil {
		panic(err)
	}
	return string(b)
}()
