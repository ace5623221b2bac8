package pgbouncer

import "syscall"

// setParentDeathSignal makes the kernel stop pgbouncer when the test
// process dies without Close.
func setParentDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGTERM }
