package pgqueue

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// testHooks let tests force races; all nil outside tests.
type testHooks struct {
	// beforeRescueWrite runs between reading expired jobs and putting them
	// back.
	beforeRescueWrite func(ids []int64)
	// finishQuery, when set, replaces the query that records job results,
	// so tests can lose its reply.
	finishQuery func(ctx context.Context, query string, args ...any) (pgx.Rows, error)
	// claimAged, when set, makes every claim look this much older when its
	// jobs are dispatched.
	claimAged time.Duration
}
