//go:build aix || (!unix && !windows)

package filelock

import (
	"errors"
	"os"
)

// Platforms without flock(2) or LockFileEx (AIX, Plan 9, js, wasip1) get no
// lock at all rather than fcntl(2) locks, whose per-process semantics would
// break the guarantees in the package documentation.

func tryLockFile(*os.File, bool) error { return errors.ErrUnsupported }

func unlockFile(*os.File) error { return errors.ErrUnsupported }
