//go:build !unix

package pgserver

import (
	"errors"
	"os"
	"syscall"
)

// Without POSIX signals both stops end the server with a kill.
var (
	sigFast      = os.Kill
	sigImmediate = os.Kill
)

type osUser struct {
	name     string
	uid, gid int
}

func serverUser() (*osUser, error) {
	return nil, errors.New("local test servers are supported on unix systems only")
}

func procAttr(*osUser) *syscall.SysProcAttr { return nil }

// processAlive says yes so that no directory is ever swept here.
func processAlive(int) bool { return true }
