package pgqueue

import (
	"context"

	"github.com/pgqueue/pgqueue/internal/enqueue"
)

// EnqueueManyCopy is EnqueueMany for a batch that takes the COPY path,
// with the hand-written encoder or, if viaPgx, pgx's CopyFrom.
func EnqueueManyCopy(ctx context.Context, c *Client, params []EnqueueManyParams, viaPgx bool) (int64, error) {
	var stream enqueue.CopyStream // nil: the hand-written encoder
	if viaPgx {
		stream = c.copyStreamPgx
	}
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	res, err := c.enq.Copy(ctx, tx, manySource(resolveAll(params)), stream)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	for queue := range res.Queues {
		c.wake(queue)
	}
	return res.Enqueued, nil
}
