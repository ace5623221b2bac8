package pgqueue

import (
	"context"
	"time"
)

// every calls f once per interval, the first time one interval from now,
// until ctx ends: the loop of the poller and of the maintenance tasks.
func every(ctx context.Context, interval time.Duration, f func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			f()
		}
	}
}
