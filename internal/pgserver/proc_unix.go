//go:build unix

package pgserver

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

var (
	// sigFast asks the postmaster for a fast shutdown.
	sigFast os.Signal = syscall.SIGINT
	// sigImmediate asks for an immediate shutdown, as pg_ctl -m immediate.
	sigImmediate os.Signal = syscall.SIGQUIT
)

// osUser is the operating system user a local server runs as.
type osUser struct {
	name     string
	uid, gid int
}

// serverUser returns the user to run initdb and postgres as: nil (this
// process's user) normally, the postgres user when we are root, because
// both programs refuse to run as root.
func serverUser() (*osUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root: initdb and postgres refuse root and need the postgres OS user: %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user postgres: %w", err)
	}
	return &osUser{name: u.Username, uid: uid, gid: gid}, nil
}

func procAttr(u *osUser) *syscall.SysProcAttr {
	// A process group of its own: Ctrl-C in a terminal signals the whole
	// foreground group, and the server must outlive its client's shutdown.
	attr := &syscall.SysProcAttr{Setpgid: true}
	if u != nil {
		attr.Credential = &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}
	}
	setParentDeathSignal(attr)
	return attr
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
