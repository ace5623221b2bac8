//go:build windows

package filelock

import (
	"os"

	"golang.org/x/sys/windows"
)

// Windows has no whole-file lock, so a lock covers the byte range every
// [Lock] uses: from offset 0, length 2^64-1 (both 32-bit halves at their
// maximum). Locking past the end of a file is allowed, and nothing is ever
// written to a lock file, so the range stands for the whole file. Windows
// range locks are mandatory for I/O on the range (other handles cannot write
// it, nor read it under an exclusive lock), one more reason to keep data out
// of lock files.
const (
	rangeLow  = ^uint32(0)
	rangeHigh = ^uint32(0)
)

func tryLockFile(f *os.File, exclusive bool) error {
	flags := uint32(windows.LOCKFILE_FAIL_IMMEDIATELY)
	if exclusive {
		flags |= windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	err := control(f, func(h windows.Handle) error {
		// The zero Overlapped puts the range at offset 0; os.OpenFile
		// returns a synchronous handle, so the call completes before it
		// returns.
		return windows.LockFileEx(h, flags, 0, rangeLow, rangeHigh, new(windows.Overlapped))
	})
	if err == windows.ERROR_LOCK_VIOLATION {
		return errWouldBlock
	}
	return err
}

func unlockFile(f *os.File) error {
	return control(f, func(h windows.Handle) error {
		return windows.UnlockFileEx(h, 0, rangeLow, rangeHigh, new(windows.Overlapped))
	})
}

func control(f *os.File, fn func(windows.Handle) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(h uintptr) { ferr = fn(windows.Handle(h)) }); err != nil {
		return err
	}
	return ferr
}
