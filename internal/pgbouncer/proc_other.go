//go:build !linux

package pgbouncer

import "syscall"

func setParentDeathSignal(*syscall.SysProcAttr) {}
