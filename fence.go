package pgqueue

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgqueue/pgqueue/internal/enqueue"
)

// staleFenceCode is the SQLSTATE check_fence raises for a stale token.
const staleFenceCode = "PQF01"

// CheckFenceTx records token as the highest fence token seen for resource,
// inside tx, or returns ErrStaleFence when a higher token was already
// recorded. Do your write to resource in the same tx: the check holds a lock
// on resource's fence row until tx ends, so a stale holder can neither pass
// the check nor slip a write in after a newer holder's. Equal tokens pass,
// so one holder may write many times.
//
// Pass a job's Fence as token to fence writes made on the job's behalf. In
// SQL the same check is the function <schema>.check_fence(resource, token),
// which raises SQLSTATE PQF01.
func (c *Client) CheckFenceTx(ctx context.Context, tx pgx.Tx, resource string, token int64) error {
	if enqueue.IsNilValue(tx) {
		return fmt.Errorf("check fence %q: %w", resource, errNilTx)
	}
	if _, err := tx.Exec(ctx, c.q.CheckFence, resource, token); err != nil {
		if IsStaleFence(err) {
			return fmt.Errorf("check fence %q token %d: %w", resource, token, ErrStaleFence)
		}
		return dbError(fmt.Sprintf("check fence %q", resource), err)
	}
	return nil
}

// IsStaleFence reports whether err is, or wraps, a stale-token refusal:
// ErrStaleFence or the PQF01 error that <schema>.check_fence raises in your
// own SQL.
func IsStaleFence(err error) bool {
	if errors.Is(err, ErrStaleFence) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == staleFenceCode
}
