package etcdlock_test

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/pgqueue/pgqueue/etcdlock"
	"github.com/pgqueue/pgqueue/internal/testdb"
	"github.com/pgqueue/pgqueue/pglock"
)

// A lock in etcd guards a write to PostgreSQL, which check_fence fences
// with the lock's token, the create revision of its key.
func Example() {
	ctx := context.Background()
	pool, done := testdb.ExamplePool("etcdlock_example")
	defer done()
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{shared.endpoint}}) // your etcd
	if err != nil {
		panic(err)
	}
	defer client.Close()

	locker, err := etcdlock.New(client, "nightly-report", nil)
	if err != nil {
		panic(err)
	}
	lock, err := locker.Lock(ctx)
	if err != nil {
		panic(err)
	}
	defer lock.Release(ctx)

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
	// Output: while held: etcd lock "nightly-report": lock busy
}
