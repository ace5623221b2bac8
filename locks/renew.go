package locks

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// KeepRenewed renews a held lock every interval until stop is closed,
// when it returns nil, or until the lock is lost, when it returns an
// error wrapping ErrLost: the error of a renewal that wraps ErrLost (the
// backend says another holder has it), or its own once validUntil less
// margin has passed with no renewal through. what names the lock in that
// error ("redis lock \"jobs\" fence 7").
//
// renew renews the lock once and returns its new end by this process's
// monotonic clock (the time the renewal was sent plus the TTL, never the
// backend's clock). Its other errors are retried at the next interval. Each
// call gets a deadline of the next interval or validUntil less margin,
// whichever comes first, so a renewal that hangs cannot outlive the time
// the holder must stop acting. ctx is the lock's context: the renewals'
// deadlines derive from it.
//
// Backends that renew by time (pglock's lease locks, redislock) share it,
// so they stop acting at the same point of a lease.
func KeepRenewed(ctx context.Context, stop <-chan struct{}, what string, validUntil time.Time, interval, margin time.Duration,
	renew func(ctx context.Context) (time.Time, error)) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	stopAt := time.NewTimer(time.Until(validUntil.Add(-margin)))
	defer stopAt.Stop()
	var lastErr error
	for {
		select {
		case <-stop:
			return nil
		case <-stopAt.C:
			if lastErr != nil {
				return fmt.Errorf("%s: no renewal got through before its end less the safety margin: %w (last: %w)", what, ErrLost, lastErr)
			}
			return fmt.Errorf("%s: no renewal got through before its end less the safety margin: %w", what, ErrLost)
		case <-tick.C:
		}
		deadline := time.Now().Add(interval)
		if end := validUntil.Add(-margin); end.Before(deadline) {
			deadline = end
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		until, err := renew(rctx)
		cancel()
		switch {
		case err == nil:
			validUntil = until
			stopAt.Reset(time.Until(validUntil.Add(-margin)))
		case errors.Is(err, ErrLost):
			return err
		default:
			lastErr = err // again at the next tick, until stopAt
		}
	}
}
