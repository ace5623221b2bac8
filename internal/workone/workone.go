// Package workone lets package pgqueuetest run one job through a client's
// own executor, which package pgqueue does not export: pgqueue sets Run
// when it is initialised.
package workone

import "context"

// Run claims job id with client (a *pgqueue.Client), runs it through the
// client's executor on the caller's goroutine and writes its result. It
// returns what became of the job (a pgqueue.Outcome), the error the
// job's work returned, and err when the job could not be claimed or its
// result was not written.
var Run func(ctx context.Context, client any, id int64) (result string, workErr error, err error)
