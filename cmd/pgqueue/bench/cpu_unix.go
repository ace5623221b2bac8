//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPU is this process's CPU time so far, user and system.
func processCPU() time.Duration { return rusageCPU(syscall.RUSAGE_SELF) }

// rusageCPU is getrusage's user and system time for who; 0 if it fails.
func rusageCPU(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
