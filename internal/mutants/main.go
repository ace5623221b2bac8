// Command mutants checks that pgqueue's tests bite: it breaks one guarantee
// at a time (a fence condition dropped, a lock not taken, a state not
// checked), in a copy of the repository, runs the tests that should notice,
// and reports each mutant as caught or survived. It exits non-zero when a
// mutant survives, when a mutant's text is not found exactly once (the
// list must follow the code), or when the unmutated copy fails the same
// tests (a baseline that fails proves nothing).
//
// It is not part of .ci/run: a full run takes many minutes. Run it from
// the repository's root:
//
//	go run ./internal/mutants                  # every mutant, once
//	go run ./internal/mutants -run finish      # mutants whose name matches
//	go run ./internal/mutants -run finish -count 10
//	go run ./internal/mutants -list
//
// The copy is taken from the working tree (tracked and untracked files,
// .gitignore honoured), or from a commit with -rev. The shared checkout is
// never written.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// mutant is one broken guarantee.
type mutant struct {
	// name says what is broken.
	name string
	// file is relative to the repository's root; old must occur in it
	// exactly once and is replaced by new.
	file     string
	old, new string
	// tests are the runs that must fail with the mutant in place.
	tests []testRun
}

// testRun is one `go test` invocation: a package and a -run filter.
type testRun struct {
	pkg string // "./", "./integration/", "./pglock/"
	run string // -run pattern; empty runs the whole package
	// dir, when set, is the module directory to run in (a nested module
	// such as redislock).
	dir string
}

func (r testRun) String() string {
	s := r.pkg
	if r.dir != "" {
		s = r.dir + ":" + s
	}
	if r.run != "" {
		s += " -run '" + r.run + "'"
	}
	return s
}

// outcome is what one run of one mutant found.
type outcome struct {
	caught   bool
	failing  []string // the tests that failed
	duration time.Duration
}

func main() {
	var (
		runPat   = flag.String("run", "", "only the mutants whose name matches this regular expression")
		count    = flag.Int("count", 1, "runs of each mutant (for mutants caught by a race: how often)")
		list     = flag.Bool("list", false, "list the mutants and their tests, run nothing")
		rev      = flag.String("rev", "", "copy this commit instead of the working tree")
		baseline = flag.Bool("baseline", true, "first run each distinct test set on the unmutated copy; a failure there stops the run")
		race     = flag.Bool("race", false, "run the tests with -race (slower)")
		timeout  = flag.Duration("timeout", 10*time.Minute, "go test -timeout of each run")
		verbose  = flag.Bool("v", false, "print the output of every test run")
		short    = flag.Bool("short", false, "run the tests with -short")
		pkg      = flag.String("pkg", "", "only the test runs of this package (\"./\", \"./integration/\")")
	)
	flag.Parse()
	if err := run(options{runPat: *runPat, count: *count, list: *list, rev: *rev, baseline: *baseline,
		race: *race, timeout: *timeout, verbose: *verbose, short: *short, pkg: *pkg}); err != nil {
		fmt.Fprintf(os.Stderr, "mutants: %v\n", err)
		os.Exit(1)
	}
}

type options struct {
	runPat        string
	count         int
	list          bool
	rev           string
	baseline      bool
	race, verbose bool
	short         bool
	timeout       time.Duration
	pkg           string
}

func run(o options) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	pat, err := regexp.Compile(o.runPat)
	if err != nil {
		return fmt.Errorf("-run: %w", err)
	}
	var chosen []mutant
	for _, m := range mutants {
		if !pat.MatchString(m.name) {
			continue
		}
		if o.pkg != "" {
			m.tests = slices.DeleteFunc(slices.Clone(m.tests), func(t testRun) bool { return t.pkg != o.pkg || t.dir != "" })
			if len(m.tests) == 0 {
				continue
			}
		}
		chosen = append(chosen, m)
	}
	if len(chosen) == 0 {
		return fmt.Errorf("no mutant matches %q", o.runPat)
	}
	if o.list {
		for _, m := range chosen {
			if err := m.check(root); err != nil {
				return err
			}
			fmt.Printf("%-40s %s\n", m.name, m.file)
			for _, t := range m.tests {
				fmt.Printf("    go test %s\n", t)
			}
		}
		return nil
	}

	work, err := os.MkdirTemp("", "pgqueue-mutants-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if err := copyTree(root, work, o.rev); err != nil {
		return fmt.Errorf("copy the repository: %w", err)
	}
	// Every mutant's text first, so a stale list fails before any test runs.
	var stale []string
	for _, m := range chosen {
		if err := m.check(work); err != nil {
			stale = append(stale, err.Error())
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("mutants that no longer match the code:\n  %s", strings.Join(stale, "\n  "))
	}

	// Interrupted, the test run in flight is killed and the copy removed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.baseline {
		seen := map[string]bool{}
		for _, m := range chosen {
			for _, t := range m.tests {
				if seen[t.String()] {
					continue
				}
				seen[t.String()] = true
				fmt.Printf("baseline  go test %s ... ", t)
				out, failed, err := goTest(ctx, work, t, o)
				if err != nil {
					return fmt.Errorf("baseline %s: %w\n%s", t, err, out)
				}
				if len(failed) > 0 {
					fmt.Println("FAIL")
					return fmt.Errorf("the unmutated copy fails %s (%s): fix that first\n%s", t, strings.Join(failed, ", "), tail(out, 4000))
				}
				fmt.Println("ok")
			}
		}
	}

	type row struct {
		m        mutant
		caught   int
		failing  []string
		duration time.Duration
	}
	var rows []row
	survivors := 0
	for _, m := range chosen {
		r := row{m: m}
		for i := range o.count {
			fmt.Printf("mutant %-38s run %d/%d ... ", m.name, i+1, o.count)
			res, err := m.try(ctx, work, o)
			if err != nil {
				fmt.Println("ERROR")
				return fmt.Errorf("mutant %s: %w", m.name, err)
			}
			r.duration += res.duration
			if res.caught {
				r.caught++
				for _, f := range res.failing {
					if !slices.Contains(r.failing, f) {
						r.failing = append(r.failing, f)
					}
				}
				fmt.Printf("caught (%s) by %s\n", res.duration.Round(time.Second), strings.Join(res.failing, ", "))
			} else {
				fmt.Printf("SURVIVED (%s)\n", res.duration.Round(time.Second))
			}
		}
		if r.caught < o.count {
			survivors++
		}
		rows = append(rows, r)
	}

	// The table docs/dev/mutants.md carries.
	fmt.Printf("\n| mutant | file | caught | by |\n|---|---|---|---|\n")
	for _, r := range rows {
		by := strings.Join(r.failing, ", ")
		if by == "" {
			by = "**survived**"
		}
		fmt.Printf("| %s | `%s` | %d of %d | %s |\n", r.m.name, r.m.file, r.caught, o.count, by)
	}
	if survivors > 0 {
		return fmt.Errorf("%d of %d mutants survived at least one run", survivors, len(rows))
	}
	fmt.Printf("\nall %d mutants caught in every run\n", len(rows))
	return nil
}

// check reports whether m's text occurs exactly once in its file.
func (m mutant) check(root string) error {
	b, err := os.ReadFile(filepath.Join(root, m.file))
	if err != nil {
		return fmt.Errorf("%s: %w", m.name, err)
	}
	if n := bytes.Count(b, []byte(m.old)); n != 1 {
		return fmt.Errorf("%s: %s holds its text %d times, want exactly once: %q", m.name, m.file, n, m.old)
	}
	if len(m.tests) == 0 {
		return fmt.Errorf("%s: no tests", m.name)
	}
	return nil
}

// try applies m to the copy at root, runs its tests, and puts the file
// back, whatever happens.
func (m mutant) try(ctx context.Context, root string, o options) (res outcome, err error) {
	path := filepath.Join(root, m.file)
	orig, err := os.ReadFile(path)
	if err != nil {
		return res, err
	}
	defer func() {
		if werr := os.WriteFile(path, orig, 0o644); werr != nil && err == nil {
			err = fmt.Errorf("restore %s: %w", m.file, werr)
		}
	}()
	mutated := bytes.Replace(orig, []byte(m.old), []byte(m.new), 1)
	if err := os.WriteFile(path, mutated, 0o644); err != nil {
		return res, err
	}
	began := time.Now()
	for _, t := range m.tests {
		out, failed, err := goTest(ctx, root, t, o)
		if err != nil {
			return res, fmt.Errorf("go test %s: %w\n%s", t, err, tail(out, 4000))
		}
		res.failing = append(res.failing, failed...)
	}
	res.duration = time.Since(began)
	res.caught = len(res.failing) > 0
	return res, nil
}

var (
	failLine  = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)
	panicLine = regexp.MustCompile(`(?m)^panic: |^FAIL\s+\S+\s+\S+\s*$`)
)

// goTest runs one test set in the copy and returns its output and the
// failing tests (the deepest subtest names). A build failure is an error:
// a mutant that does not compile proves nothing about the tests.
func goTest(ctx context.Context, root string, t testRun, o options) (string, []string, error) {
	args := []string{"test", "-count=1", "-timeout", o.timeout.String()}
	if o.race {
		args = append(args, "-race")
	}
	if o.short {
		args = append(args, "-short")
	}
	if t.run != "" {
		args = append(args, "-run", t.run)
	}
	args = append(args, t.pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join(root, t.dir)
	var buf bytes.Buffer
	w := io.Writer(&buf)
	if o.verbose {
		w = io.MultiWriter(&buf, os.Stdout)
	}
	cmd.Stdout, cmd.Stderr = w, w
	err := cmd.Run()
	out := buf.String()
	if strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]") {
		return out, nil, errors.New("build failed")
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return out, nil, err
	}
	if err == nil && strings.Contains(out, "no tests to run") {
		// A filter that matches nothing would let every mutant survive, or
		// pass a baseline that proves nothing.
		return out, nil, errors.New("the -run filter matches no test")
	}
	var failed []string
	for _, m := range failLine.FindAllStringSubmatch(out, -1) {
		failed = append(failed, m[1])
	}
	failed = deepest(failed)
	if err != nil && len(failed) == 0 {
		// A panic, a timeout or a TestMain failure: still a failure.
		what := "exit " + fmt.Sprint(exitErr.ExitCode())
		if panicLine.MatchString(out) {
			what = "panic or timeout"
		}
		failed = []string{fmt.Sprintf("%s (%s)", t.pkg, what)}
	}
	return out, failed, nil
}

// deepest keeps the names that are not a prefix of another (a failing
// subtest fails its parents too).
func deepest(names []string) []string {
	var out []string
	for _, n := range names {
		parent := false
		for _, o := range names {
			if o != n && strings.HasPrefix(o, n+"/") {
				parent = true
				break
			}
		}
		if !parent && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("find the repository (run from inside it): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// copyTree copies the repository at root into dst: the files of commit
// rev, or the working tree's tracked and untracked files, ignored ones
// left out.
func copyTree(root, dst, rev string) error {
	if rev != "" {
		archive := exec.Command("git", "archive", "--format=tar", rev)
		archive.Dir = root
		untar := exec.Command("tar", "-x", "-C", dst)
		pipe, err := archive.StdoutPipe()
		if err != nil {
			return err
		}
		untar.Stdin = pipe
		if err := untar.Start(); err != nil {
			return err
		}
		if err := archive.Run(); err != nil {
			return fmt.Errorf("git archive %s: %w", rev, err)
		}
		return untar.Wait()
	}
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, rel)
		info, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(target, b, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}
