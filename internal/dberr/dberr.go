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

// Ctx returns ctx's error, prefixed like Wrap, when ctx is done.
func Ctx(ctx context.Context, pkg, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %s: %w", pkg, op, err)
	}
	return nil
}
