package pgserver

import "syscall"

// setParentDeathSignal makes the kernel send SIGQUIT (immediate shutdown)
// to the server when the test process dies without Close, so no postmaster
// outlives a test binary that panicked or timed out. The signal is tied to
// the forking OS thread; the Go runtime only ends threads that a goroutine
// left locked, which nothing in a test binary here does.
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGQUIT
}
