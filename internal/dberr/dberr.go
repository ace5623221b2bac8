// Package dberr translates errors at the pgx boundary into the sentinels
// pgqueue's packages document, wrapped with the operation that failed.
package dberr

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/puddle/v2"
)

// ErrClosedPool is returned by any call that needs the database after its
// pool was closed. pgqueue and pglock export it under their own names.
var ErrClosedPool = errors.New("pgqueue: pool is closed")

// Wrap returns nil for nil, ErrClosedPool for a closed pool, and err
// otherwise, each prefixed with the package and the operation.
func Wrap(pkg, op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, puddle.ErrClosedPool) {
		return fmt.Errorf("%s: %s: %w", pkg, op, ErrClosedPool)
	}
	return fmt.Errorf("%s: %s: %w", pkg, op, err)
}

// Ctx returns ctx's error, prefixed like Wrap, when ctx is done, and with
// it the cause ctx was cancelled with when that says more: a handler
// whose claim was lost gets context.Canceled and ErrJobLeaseLost, both
// matched by errors.Is.
func Ctx(ctx context.Context, pkg, op string) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%s: %s: %w: %w", pkg, op, err, cause)
	}
	return fmt.Errorf("%s: %s: %w", pkg, op, err)
}
