package main

import (
	"errors"
	"testing"
	"time"
)

// Without Docker the check ends within its timeout, with errNoDocker, so
// that a machine without Docker falls through to the harness's message
// quickly.
func TestPingFailsFast(t *testing.T) {
	const timeout = 3 * time.Second
	begin := time.Now()
	err := pingDocker(t.Context(), timeout)
	elapsed := time.Since(begin)
	if err == nil {
		t.Skip("Docker answers here")
	}
	t.Logf("no Docker (%v): %v", elapsed.Round(time.Millisecond), err)
	if !errors.Is(err, errNoDocker) {
		t.Errorf("err = %v, want errNoDocker", err)
	}
	if elapsed > timeout+time.Second {
		t.Errorf("ping took %v, want at most about %v", elapsed, timeout)
	}
}
