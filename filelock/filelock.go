package filelock

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/pgqueue/pgqueue/locks"
)

var (
	// ErrBusy is returned by [Lock.TryLock], [Lock.TryRLock],
	// [Marker.TryAcquire] and [Fenced.TryLock] when another holder has the
	// lock or a live marker, and only then: permission, missing-directory
	// and I/O errors are returned as themselves. It is the same value as
	// locks.ErrBusy.
	ErrBusy = locks.ErrBusy

	// ErrAlreadyHeld is returned by the locking methods of a [Lock] that
	// already holds its lock or is acquiring it, and by [Marker.Acquire] and
	// [Marker.TryAcquire] on a Marker that already holds its marker. Locks are
	// not reentrant and are not upgraded or downgraded: Unlock first.
	ErrAlreadyHeld = errors.New("filelock: already held")

	// ErrNotLocked is returned by [Lock.Unlock] when the Lock does not hold
	// its lock.
	ErrNotLocked = errors.New("filelock: not locked")

	// ErrNotOwner is returned by [Marker.Renew] and [Marker.Release] when the
	// marker file is missing or names another owner: the lease lapsed and was
	// taken over, or the Marker never acquired it.
	ErrNotOwner = errors.New("filelock: not the marker owner")
)

// errWouldBlock is what the platform tryLockFile returns when another open
// file holds a conflicting lock; the exported API turns it into [ErrBusy].
var errWouldBlock = errors.New("filelock: would block")

// Polling bounds for the blocking forms: short enough that an uncontended
// hand-over costs about a millisecond, capped so that long waits cost little.
const (
	minPollDelay = time.Millisecond
	maxPollDelay = 50 * time.Millisecond
)

// Lock is a cross-process lock on a file, taken whole: exclusive with
// [Lock.Lock] and [Lock.TryLock], shared with [Lock.RLock] and
// [Lock.TryRLock]. Create it with [New]; the zero value is not usable.
//
// Each acquisition opens the file anew, so two Lock values for the same path
// exclude each other even inside one process. A Lock is meant to be used by
// one goroutine at a time; its state is guarded, so misuse from several
// goroutines returns [ErrAlreadyHeld] or [ErrNotLocked] rather than corrupting
// it.
type Lock struct {
	path string

	mu        sync.Mutex
	acquiring bool     // an acquire is in progress and f is not yet set
	f         *os.File // non-nil while the lock is held
}

// New returns a Lock for the file at path, which is created on first use
// with mode 0o666 (before umask) and never deleted; see the package
// documentation for why. New does no I/O.
func New(path string) *Lock {
	return &Lock{path: path}
}

// Lock takes the exclusive lock, waiting while others hold the lock in any
// mode. It polls, so waiters are served in no particular order. When ctx is
// done first it returns an error that wraps ctx.Err().
func (l *Lock) Lock(ctx context.Context) error {
	return l.acquire(ctx, true, true)
}

// TryLock takes the exclusive lock if no one holds the lock in any mode, and
// otherwise returns an error that wraps [ErrBusy].
func (l *Lock) TryLock() error {
	return l.acquire(context.Background(), true, false)
}

// RLock takes a shared lock, waiting while someone holds the exclusive lock.
// Any number of shared holders may coexist. It polls, so waiters are served in
// no particular order and a steady stream of shared holders can starve an
// exclusive waiter. When ctx is done first it returns an error that wraps
// ctx.Err().
func (l *Lock) RLock(ctx context.Context) error {
	return l.acquire(ctx, false, true)
}

// TryRLock takes a shared lock if no one holds the exclusive lock, and
// otherwise returns an error that wraps [ErrBusy].
func (l *Lock) TryRLock() error {
	return l.acquire(context.Background(), false, false)
}

// Unlock releases the lock held in either mode and closes the file. It
// returns an error wrapping [ErrNotLocked] when the lock is not held. The lock
// file stays in place.
func (l *Lock) Unlock() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return &fs.PathError{Op: "unlock", Path: l.path, Err: ErrNotLocked}
	}
	f := l.f
	l.f = nil
	// Unlock explicitly instead of relying on Close: a child forked by this
	// process and not yet exec'd shares the open file description, and
	// Close alone would leave the lock held until that child execs.
	err := unlockFile(f)
	cerr := f.Close()
	if err != nil {
		return &fs.PathError{Op: "unlock", Path: l.path, Err: err}
	}
	return cerr
}

func (l *Lock) acquire(ctx context.Context, exclusive, wait bool) error {
	op := "rlock"
	if exclusive {
		op = "lock"
	}
	l.mu.Lock()
	if l.f != nil || l.acquiring {
		l.mu.Unlock()
		return &fs.PathError{Op: op, Path: l.path, Err: ErrAlreadyHeld}
	}
	l.acquiring = true
	l.mu.Unlock()

	// The mutex is not held while waiting, so Unlock from another goroutine
	// reports ErrNotLocked instead of blocking on a wait it cannot end.
	f, err := lockPath(ctx, op, l.path, exclusive, wait)

	l.mu.Lock()
	l.acquiring = false
	l.f = f
	l.mu.Unlock()
	return err
}

// lockPath opens path and locks it, returning the open file that holds the
// lock. On failure the file is closed.
func lockPath(ctx context.Context, op, path string, exclusive, wait bool) (*os.File, error) {
	if err := ctx.Err(); err != nil {
		return nil, &fs.PathError{Op: op, Path: path, Err: err}
	}
	// Read-write for shared locks too: one open mode for every caller keeps
	// the rule simple (whoever may write the lock file may lock it), and the
	// Windows byte-range lock needs no more than this.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err // already an *fs.PathError naming path
	}
	delay := minPollDelay
	for {
		err := tryLockFile(f, exclusive)
		if err == nil {
			return f, nil
		}
		if err != errWouldBlock {
			f.Close()
			return nil, &fs.PathError{Op: op, Path: path, Err: err}
		}
		if !wait {
			f.Close()
			return nil, &fs.PathError{Op: op, Path: path, Err: ErrBusy}
		}
		if err := sleep(ctx, delay); err != nil {
			f.Close()
			return nil, &fs.PathError{Op: op, Path: path, Err: err}
		}
		delay = min(2*delay, maxPollDelay)
	}
}

// sleep waits for d or until ctx is done, returning ctx.Err() in that case.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
