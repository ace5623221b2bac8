package redislock_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/pgqueue/pgqueue/internal/testdb"
	"github.com/pgqueue/pgqueue/pglock"
	"github.com/pgqueue/pgqueue/redislock"
)

// A lock in Redis guards a write to PostgreSQL, which check_fence fences
// with the lock's token: a holder that paused past its TTL and lost the
// lock cannot write after its successor.
func Example() {
	ctx := context.Background()
	pool, done := testdb.ExamplePool("redislock_example")
	defer done()
	client := redis.NewClient(&redis.Options{Addr: shared.addr}) // your Redis
	defer client.Close()

	locker, err := redislock.New(client, "nightly-report", nil)
	if err != nil {
		panic(err)
	}
	lock, err := locker.Lock(ctx)
	if err != nil {
		panic(err)
	}
	defer lock.Release(ctx)

	// The work runs under the lock's context, which ends if the lock is
	// lost, and every write checks the token where the data lives.
	tx, err := pool.Begin(lock.Context())
	if err != nil {
		panic(err)
	}
	defer tx.Rollback(ctx)
	if err := pglock.CheckFenceTx(lock.Context(), tx, "pgqueue", "nightly-report", lock.Fence()); err != nil {
		panic(err) // pglock.ErrStaleFence: a newer holder wrote already
	}
	// ... the report's writes, in tx ...
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}

	_, err = locker.TryLock(ctx)
	fmt.Println("while held:", err)
	// Output: while held: redis lock "nightly-report": lock busy
}
