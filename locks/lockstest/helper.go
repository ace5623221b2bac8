package lockstest

import (
	"os"
	"os/exec"
	"strings"
)

// HelperCmd returns a command that runs this test binary again as a child
// process: -test.run selects TestHelperProcess, roleEnv=role in its
// environment says what to do, and args follow "--" (flag.Args in the
// child).
func HelperCmd(roleEnv, role string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestHelperProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), roleEnv+"="+role,
		// Under -race a child would otherwise sleep 1s on exit.
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	return cmd
}
