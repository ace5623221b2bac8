package filelock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/pgqueue/pgqueue/locks"
)

var (
	_ locks.Locker = (*Fenced)(nil)
	_ locks.Lock   = (*FencedLock)(nil)
)

// ErrBadFence is returned by [Fenced.Lock] and [Fenced.TryLock] when the
// lock file holds something other than a fence counter: something else
// writes into it. The lock is not taken then.
var ErrBadFence = errors.New("filelock: lock file holds no fence counter")

// DefaultCheckInterval is how often a [FencedLock] checks, by default, that
// its path still names the file it locked.
const DefaultCheckInterval = time.Second

// Fenced is an exclusive file lock with fence tokens, as a locks.Locker:
// the lock file holds a counter that each acquisition increments, under
// the lock, and syncs to disk before it returns; the new value is the
// acquisition's fence token. A new or empty file's counter starts at the
// clock in microseconds. Create it with [NewFenced].
//
// The counter is in the lock file itself, so it cannot be separated from
// the lock it counts; only the holder writes it, through the descriptor
// that holds the lock. A plain [Lock] on the same path excludes a Fenced
// holder, and the other way round, but does not count. The counter is
// synced to disk before the token is handed out, so a token is never
// handed out twice, even across a crash of the machine: PostgreSQL's
// check_fence, which remembers the highest token, would refuse every later
// holder's writes if the counter went back.
type Fenced struct {
	path     string
	interval time.Duration
}

// FencedOpts are options of [NewFenced].
type FencedOpts struct {
	// CheckInterval is how often a held lock checks that its path still
	// names the file it locked. Default [DefaultCheckInterval].
	CheckInterval time.Duration
}

// NewFenced returns a fenced lock on the file at path, which is created on
// first use and never deleted. opts may be nil. NewFenced does no I/O.
func NewFenced(path string, opts *FencedOpts) *Fenced {
	f := &Fenced{path: path, interval: DefaultCheckInterval}
	if opts != nil && opts.CheckInterval > 0 {
		f.interval = opts.CheckInterval
	}
	return f
}

// Lock takes the lock, waiting while another holds it, until ctx is done.
// It polls, like [Lock.Lock]. The Lock it returns is a *FencedLock.
func (f *Fenced) Lock(ctx context.Context) (locks.Lock, error) { return f.lock(ctx, true) }

// TryLock takes the lock if no one holds it, and otherwise returns an
// error that wraps [ErrBusy]. The Lock it returns is a *FencedLock.
func (f *Fenced) TryLock(ctx context.Context) (locks.Lock, error) { return f.lock(ctx, false) }

func (f *Fenced) lock(ctx context.Context, wait bool) (locks.Lock, error) {
	file, err := lockPath(ctx, "lock", f.path, true, wait)
	if err != nil {
		return nil, err
	}
	fence, err := bumpFence(file)
	if err != nil {
		_ = unlockFile(file)
		_ = file.Close()
		return nil, &fs.PathError{Op: "fence", Path: f.path, Err: err}
	}
	l := &FencedLock{path: f.path, fence: fence, f: file, stop: make(chan struct{}), done: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	go l.watch(f.interval)
	return l, nil
}

// bumpFence reads the counter from the locked file, writes it back
// incremented and syncs it, and returns the new value. An empty file
// counts as 0.
func bumpFence(f *os.File) (int64, error) {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 64))
	if err != nil {
		return 0, err
	}
	// A new counter starts at the clock, in microseconds, not at 0: if
	// the file is deleted, its successor's tokens are still higher than
	// the old ones (unless more than one acquisition a microsecond was
	// made), and check_fence lets the new holders write.
	n := time.Now().UnixMicro()
	if s := bytes.TrimSpace(b); len(s) > 0 {
		n, err = strconv.ParseInt(string(s), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%w: %q", ErrBadFence, b)
		}
	}
	n++
	// The new number is never shorter than the old, so it overwrites it
	// whole; Truncate is for a file that had trailing junk space.
	if _, err := f.WriteAt([]byte(strconv.FormatInt(n, 10)+"\n"), 0); err != nil {
		return 0, err
	}
	if err := f.Truncate(int64(len(strconv.FormatInt(n, 10)) + 1)); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	return n, nil
}

// FencedLock is one acquisition of a [Fenced] lock.
//
// A file lock is not lost while its process lives, with one exception that
// FencedLock watches for: the lock file deleted or replaced, after which
// another process can lock a new file at the path. Then its context is
// cancelled with a cause wrapping ErrLost.
type FencedLock struct {
	path   string
	fence  int64
	f      *os.File
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// Name returns the lock file's path.
func (l *FencedLock) Name() string { return l.path }

// Fence returns the acquisition's token: the counter's value in the file.
func (l *FencedLock) Fence() int64 { return l.fence }

// Context is cancelled when the lock is lost (cause wraps ErrLost) or
// released (cause ErrReleased).
func (l *FencedLock) Context() context.Context { return l.ctx }

// watch checks every interval that the path still names the locked file.
func (l *FencedLock) watch(interval time.Duration) {
	defer close(l.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		held, err := l.f.Stat()
		if err != nil {
			continue // an fstat failure says nothing about the path
		}
		now, err := os.Stat(l.path)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && !os.SameFile(held, now)) {
			l.cancel(&fs.PathError{Op: "lock", Path: l.path, Err: fmt.Errorf("lock file deleted or replaced: %w", locks.ErrLost)})
			return
		}
	}
}

// Release unlocks the file and closes it. It returns an error wrapping
// ErrLost when the lock file was found deleted or replaced, and one
// wrapping [ErrNotLocked] when called again.
func (l *FencedLock) Release(context.Context) error {
	first := false
	l.once.Do(func() { close(l.stop); first = true })
	if !first {
		return &fs.PathError{Op: "unlock", Path: l.path, Err: ErrNotLocked}
	}
	<-l.done
	err := unlockFile(l.f)
	cerr := l.f.Close()
	cause := context.Cause(l.ctx)
	l.cancel(locks.ErrReleased)
	switch {
	case cause != nil:
		return cause
	case err != nil:
		return &fs.PathError{Op: "unlock", Path: l.path, Err: err}
	}
	return cerr
}
