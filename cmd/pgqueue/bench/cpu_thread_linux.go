//go:build linux

package bench

import (
	"syscall"
	"time"
)

// threadCPU is the calling thread's CPU time so far, user and system: of
// a goroutine locked to its thread, what that goroutine used.
func threadCPU() time.Duration { return rusageCPU(syscall.RUSAGE_THREAD) }
