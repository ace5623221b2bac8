//go:build unix && !aix

package filelock

import (
	"os"

	"golang.org/x/sys/unix"
)

// tryLockFile takes a whole-file flock(2) lock without blocking. flock locks
// belong to the open file description, so every [Lock] opens its own.
func tryLockFile(f *os.File, exclusive bool) error {
	how := unix.LOCK_SH | unix.LOCK_NB
	if exclusive {
		how = unix.LOCK_EX | unix.LOCK_NB
	}
	err := flock(f, how)
	if err == unix.EWOULDBLOCK || err == unix.EAGAIN {
		return errWouldBlock
	}
	return err
}

func unlockFile(f *os.File) error {
	return flock(f, unix.LOCK_UN)
}

// flock calls flock(2) through SyscallConn, which, unlike f.Fd, leaves the
// descriptor's blocking mode alone and keeps f open during the call.
func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	err = rc.Control(func(fd uintptr) {
		for {
			ferr = unix.Flock(int(fd), how)
			if ferr != unix.EINTR {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return ferr
}
