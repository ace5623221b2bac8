package filelock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/pgqueue/pgqueue/filelock"
)

func ExampleLock() {
	dir, err := os.MkdirTemp("", "filelock-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "compact.lock")

	l := filelock.New(path)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Lock(ctx); err != nil {
		log.Fatal(err)
	}

	// Any other Lock on the path, in this process or another, is kept out.
	err = filelock.New(path).TryLock()
	fmt.Println("other TryLock busy:", errors.Is(err, filelock.ErrBusy))

	if err := l.Unlock(); err != nil {
		log.Fatal(err)
	}
	err = filelock.New(path).TryRLock()
	fmt.Println("after Unlock, other TryRLock:", err)
	// Output:
	// other TryLock busy: true
	// after Unlock, other TryRLock: <nil>
}

func ExampleMarker() {
	dir, err := os.MkdirTemp("", "filelock-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "reindex.marker")
	ctx := context.Background()

	m := filelock.NewMarker(path, time.Minute)
	if err := m.TryAcquire(ctx); errors.Is(err, filelock.ErrBusy) {
		fmt.Println("someone else is reindexing")
		return
	} else if err != nil {
		log.Fatal(err)
	}

	// Another process sees a live marker.
	err = filelock.NewMarker(path, time.Minute).TryAcquire(ctx)
	fmt.Println("other TryAcquire busy:", errors.Is(err, filelock.ErrBusy))

	// A long job renews well within the lease, and stops if it was taken over.
	if err := m.Renew(ctx); errors.Is(err, filelock.ErrNotOwner) {
		fmt.Println("lease lost, stopping")
		return
	} else if err != nil {
		log.Fatal(err)
	}

	if err := m.Release(ctx); err != nil {
		log.Fatal(err)
	}
	_, err = os.Stat(path)
	fmt.Println("marker removed:", errors.Is(err, os.ErrNotExist))
	// Output:
	// other TryAcquire busy: true
	// marker removed: true
}

// A fenced file lock hands out a token per acquisition, kept in the lock
// file, and ends its context when released (or lost).
func ExampleFenced() {
	dir, err := os.MkdirTemp("", "filelock-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	f := filelock.NewFenced(filepath.Join(dir, "report.lock"), nil)

	first, err := f.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_, err = f.TryLock(ctx)
	fmt.Println("busy while held:", errors.Is(err, filelock.ErrBusy))
	if err := first.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("after release:", context.Cause(first.Context()))

	second, err := f.TryLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer second.Release(ctx)
	fmt.Println("next token:", second.Fence() == first.Fence()+1)
	// Output:
	// busy while held: true
	// after release: lock released
	// next token: true
}
