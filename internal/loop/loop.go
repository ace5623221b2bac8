// Package loop holds what the client's background loops share (the
// poller, the producers' claims and the maintenance tasks): the ticking
// loop and the failure log that says a repeating failure a few times, not
// at every round. It imports only the standard library.
package loop

import (
	"context"
	"time"
)

// Every calls f once per interval, the first time one interval from now,
// until ctx ends.
func Every(ctx context.Context, interval time.Duration, f func()) {
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
