//go:build linux

package bench

import (
	"syscall"
	"time"
)

// threadCPU is the calling thread's CPU time so far, user and system: of
// a goroutine locked to its thread, what that goroutine used.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
