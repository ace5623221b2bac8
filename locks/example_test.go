package locks_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pgqueue/pgqueue/filelock"
	"github.com/pgqueue/pgqueue/locks"
)

// runExclusive is written against the interface: it runs work under the
// lock, with the lock's context and fence token, and returns at once when
// someone else holds it.
func runExclusive(ctx context.Context, locker locks.Locker, work func(ctx context.Context, fence int64) error) (ran bool, err error) {
	lock, err := locker.TryLock(ctx)
	if errors.Is(err, locks.ErrBusy) {
		return false, nil // someone else is on it
	}
	if err != nil {
		return false, err // could not ask: not the same as busy
	}
	defer lock.Release(ctx)
	return true, work(lock.Context(), lock.Fence())
}

// Code written against locks.Locker runs on any backend: here a file lock,
// and with one constructor changed, PostgreSQL (pglock), Redis (redislock)
// or etcd (etcdlock).
func Example() {
	dir, err := os.MkdirTemp("", "locks-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	var locker locks.Locker = filelock.NewFenced(filepath.Join(dir, "report.lock"), nil)

	var fences []int64
	for range 2 {
		ran, err := runExclusive(ctx, locker, func(ctx context.Context, fence int64) error {
			fences = append(fences, fence)
			// A nested attempt while held: busy.
			ran, err := runExclusive(ctx, locker, func(context.Context, int64) error { return nil })
			fmt.Println("nested attempt ran:", ran, err)
			return nil
		})
		fmt.Println("ran:", ran, err)
	}
	fmt.Println("second fence higher:", fences[1] > fences[0])
	// Output:
	// nested attempt ran: false <nil>
	// ran: true <nil>
	// nested attempt ran: false <nil>
	// ran: true <nil>
	// second fence higher: true
}
