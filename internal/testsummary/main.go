// Command testsummary runs `go test -json` in each module directory it is
// given, goes on past a failing module, and ends with one line per module
// (PASS, FAIL or SKIP and its duration) and the tests that skipped, with
// their reasons. It is what `make test` runs (see scripts/test).
//
//	testsummary [-j n] [module dirs] -- [go test flags]
//
// While a module runs it prints what plain `go test` would print without
// -v: a line per package, and the output of failing tests in full. With
// -j above 1 it runs up to n modules at once and prints each module's
// output in one piece when the module ends.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
)

func main() {
	jobs := flag.Int("j", 1, "modules run at once; 1 when DATABASE_URL is set, since they would share its server")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: testsummary [-j n] module-dir... [-- go test flags]")
		flag.PrintDefaults()
	}
	flag.Parse()
	dirs, flags := splitArgs(flag.Args())
	if len(dirs) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	n, why := parallelism(*jobs, os.Getenv("DATABASE_URL"))
	if why != "" {
		fmt.Println("== " + why)
	}
	command := fmt.Sprintf("go test %s ./...", joinArgs(flags))
	results := runModules(dirs, n, os.Stdout, command, func(dir string, w io.Writer) moduleResult {
		return runModule(dir, flags, w)
	})
	failed := printSummary(os.Stdout, results)
	if failed {
		os.Exit(1)
	}
}

// parallelism is how many modules run at once for -j jobs: each test
// binary starts a server of its own when DATABASE_URL is unset, but with
// it set the binaries of every module would share one server and its
// connection budget (internal/pgtest), sized for one module at a time.
// why says when -j is not followed.
func parallelism(jobs int, databaseURL string) (n int, why string) {
	if jobs > 1 && databaseURL != "" {
		return 1, fmt.Sprintf("-j %d ignored: DATABASE_URL is set, one module at a time on its server", jobs)
	}
	return max(jobs, 1), ""
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

// runModules runs run for every dir, n at a time, and returns the results
// in the order of dirs; command is what run runs, for the headers. One at
// a time, a module's output streams to w as it comes; several at once,
// each module's output is held and written in one piece when it ends, so
// that modules do not interleave.
func runModules(dirs []string, n int, w io.Writer, command string, run func(dir string, w io.Writer) moduleResult) []moduleResult {
	results := make([]moduleResult, len(dirs))
	if n <= 1 {
		for i, dir := range dirs {
			fmt.Fprintf(w, "== %s: %s\n", dir, command)
			results[i] = run(dir, w)
		}
		return results
	}
	var (
		mu   sync.Mutex // w
		wg   sync.WaitGroup
		slot = make(chan struct{}, n)
	)
	for i, dir := range dirs {
		slot <- struct{}{}
		mu.Lock()
		fmt.Fprintf(w, "== %s: %s (started)\n", dir, command)
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slot }()
			var out lockedBuffer // go test's stderr is copied from another goroutine
			results[i] = run(dir, &out)
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(w, "== %s: ended after %s\n", dir, results[i].elapsed.Round(time.Second))
			_, _ = w.Write(out.Bytes())
		}()
	}
	wg.Wait()
	return results
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Bytes()
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
