package pglock

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// A session advisory lock is re-entrant within one backend session, so
// PostgreSQL alone cannot keep two holders of one process apart if they
// ever reach the same session. guards is the process-local half of the
// exclusion: one holder per server, database and key in this process,
// whatever the connections do.
var guards = struct {
	mu      sync.Mutex
	held    map[guardKey]chan struct{} // closed when released
	waiting map[guardKey]int           // for tests: callers waiting
}{held: map[guardKey]chan struct{}{}, waiting: map[guardKey]int{}}

type guardKey struct {
	host     string
	port     uint16
	database string
	key      Key
}

func newGuardKey(cfg *pgx.ConnConfig, k Key) guardKey {
	return guardKey{host: cfg.Host, port: cfg.Port, database: cfg.Database, key: k}
}

// guardHeld reports whether a holder in this process has g's guard. A
// guard is taken only after its connection passed the affinity probe, so
// a held guard also says that this server is reached directly.
func guardHeld(g guardKey) bool {
	guards.mu.Lock()
	defer guards.mu.Unlock()
	_, held := guards.held[g]
	return held
}

// acquireGuard takes the process-local guard of g: at once or ErrBusy when
// try, else waiting as long as ctx allows. It returns the release.
func acquireGuard(ctx context.Context, g guardKey, try bool) (func(), error) {
	for {
		guards.mu.Lock()
		ch, busy := guards.held[g]
		if !busy {
			mine := make(chan struct{})
			guards.held[g] = mine
			guards.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					guards.mu.Lock()
					delete(guards.held, g)
					guards.mu.Unlock()
					close(mine)
				})
			}, nil
		}
		if try {
			guards.mu.Unlock()
			return nil, fmt.Errorf("%w (held in this process)", ErrBusy)
		}
		guards.waiting[g]++
		guards.mu.Unlock()
		var err error
		select {
		case <-ch:
		case <-ctx.Done():
			err = ctx.Err()
		}
		guards.mu.Lock()
		if guards.waiting[g]--; guards.waiting[g] == 0 {
			delete(guards.waiting, g)
		}
		guards.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
}
