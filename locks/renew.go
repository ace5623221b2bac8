package locks

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// KeepRenewed renews a held lock until stop is closed or the lock is lost.
// It calls lost once, with an error wrapping ErrLost, when a renewal
// returns an error wrapping ErrLost (the backend says another holder has
// it), or when the lock's validity deadline passes with no renewal
// through: validUntil less margin, moved on by each successful renewal.
// what names the lock in that error ("redis lock \"jobs\" fence 7").
//
// The deadline is kept by a timer of its own, not between renewals: lost
// is called on time even while a renewal hangs in a client that ignores
// its context's deadline (go-redis without ContextTimeoutEnabled blocks
// for its whole read timeout). Pass the cancel function of the lock's
// context as lost, so that the work under the lock stops by the deadline.
//
// renew renews the lock once and returns its new end by this process's
// monotonic clock (the time the renewal was sent plus the TTL, never the
// backend's clock). Its other errors are retried at the next interval. Each
// call gets a deadline of the next interval or the validity deadline,
// whichever comes first, derived from ctx, the lock's context. A renewal
// that returns after the deadline counts for nothing: the lock was lost
// already. The first renewal is sent after interval, or sooner, halfway
// to the deadline, when an acquisition's reply came late and left less.
//
// KeepRenewed returns once stop is closed or lost was called, and any
// renewal in flight has returned, so it leaves no goroutine behind: with a
// hung client that is when the client gives up.
//
// Backends that renew by time (pglock's lease locks, redislock, etcdlock)
// share it, so they stop acting at the same point of a lease.
func KeepRenewed(ctx context.Context, stop <-chan struct{}, what string, validUntil time.Time, interval, margin time.Duration,
	renew func(ctx context.Context) (time.Time, error), lost func(error)) {
	deadline := validUntil.Add(-margin)
	expire := time.NewTimer(time.Until(deadline))
	defer expire.Stop()
	next := time.NewTimer(min(interval, time.Until(deadline)/2))
	defer next.Stop()

	type result struct {
		until time.Time
		err   error
	}
	results := make(chan result, 1)
	var (
		inFlight bool
		cancel   context.CancelFunc
		lastErr  error
	)
	// finish waits for the renewal in flight, if any, before returning.
	finish := func() {
		if inFlight {
			cancel()
			<-results
		}
	}
	expired := func() error {
		if lastErr != nil {
			return fmt.Errorf("%s: no renewal got through before its end less the safety margin: %w (last: %w)", what, ErrLost, lastErr)
		}
		return fmt.Errorf("%s: no renewal got through before its end less the safety margin: %w", what, ErrLost)
	}
	for {
		select {
		case <-stop:
			finish()
			return
		case <-expire.C:
			lost(expired())
			finish()
			return
		case <-next.C:
			next.Reset(interval)
			if inFlight {
				continue // still hanging: one renewal at a time
			}
			end := time.Now().Add(interval)
			if deadline.Before(end) {
				end = deadline
			}
			rctx, rcancel := context.WithDeadline(ctx, end)
			cancel, inFlight = rcancel, true
			go func() {
				until, err := renew(rctx)
				results <- result{until, err}
			}()
		case r := <-results:
			inFlight = false
			cancel()
			switch {
			case r.err == nil && !time.Now().Before(deadline):
				// Through, but after the deadline, when the holder must
				// have stopped already.
				lost(expired())
				return
			case r.err == nil:
				deadline = r.until.Add(-margin)
				expire.Reset(time.Until(deadline))
			case errors.Is(r.err, ErrLost):
				lost(r.err)
				return
			default:
				lastErr = r.err // again at the next tick, until the deadline
			}
		}
	}
}
