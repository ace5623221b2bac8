package pgqueue

import "context"

// EnqueueManyCopy is EnqueueMany for a batch that takes the COPY path,
// with the hand-written encoder or, if viaPgx, pgx's CopyFrom.
func EnqueueManyCopy(ctx context.Context, c *Client, params []EnqueueManyParams, viaPgx bool) (int64, error) {
	stream := c.copyStream
	if viaPgx {
		stream = c.copyStreamPgx
	}
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	params = resolveAll(params)
	n, due, err := c.copyManyWith(ctx, tx, copySource{
		n:     len(params),
		later: func(i int) bool { return params[i].Opts != nil && !params[i].Opts.RunAt.IsZero() },
		encode: func(i int, validQueue string) (*encodedJob, error) {
			return c.encodeResolved(params[i].Args, params[i].Opts, validQueue)
		},
	}, stream)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	for queue := range due {
		c.wake(queue)
	}
	return n, nil
}
