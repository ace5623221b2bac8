// Command testsummary runs `go test -json` in each module directory it is
// given, goes on past a failing module, and ends with one line per module
// (PASS, FAIL or SKIP and its duration) and the tests that skipped, with
// their reasons. It is what `make test` runs (see scripts/test).
//
//	testsummary [module dirs] -- [go test flags]
//
// While a module runs it prints what plain `go test` would print without
// -v: a line per package, and the output of failing tests in full.
package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

func main() {
	dirs, flags := splitArgs(os.Args[1:])
	if len(dirs) == 0 {
		fmt.Fprintln(os.Stderr, "usage: testsummary module-dir... [-- go test flags]")
		os.Exit(2)
	}
	var results []moduleResult
	for _, dir := range dirs {
		fmt.Printf("== %s: go test %s ./...\n", dir, joinArgs(flags))
		results = append(results, runModule(dir, flags, os.Stdout))
	}
	failed := printSummary(os.Stdout, results)
	if failed {
		os.Exit(1)
	}
}

// splitArgs splits the command line at "--": module directories before,
// go test flags after.
func splitArgs(args []string) (dirs, flags []string) {
	i := slices.Index(args, "--")
	if i < 0 {
		return args, nil
	}
	return args[:i], args[i+1:]
}

func joinArgs(flags []string) string {
	return strings.Join(append(slices.Clone(flags), "-json"), " ")
}

// runModule runs go test in dir, echoing its output to w as it comes.
func runModule(dir string, flags []string, w io.Writer) moduleResult {
	start := time.Now()
	cmd := exec.Command("go", append(append([]string{"test"}, flags...), "-json", "./...")...)
	cmd.Dir = dir
	cmd.Stderr = w
	out, err := cmd.StdoutPipe()
	if err != nil {
		return moduleResult{dir: dir, err: err}
	}
	if err := cmd.Start(); err != nil {
		return moduleResult{dir: dir, err: err}
	}
	res := parseEvents(out, w)
	res.dir = dir
	res.err = cmd.Wait()
	res.elapsed = time.Since(start)
	return res
}
