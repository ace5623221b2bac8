package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/pgqueue/pgqueue/cmd/pgqueue/bench"
)

// benchChildMode is the hidden bench mode a child process of
// `bench burn-down --processes N` runs: bench.RunChild, talking to its
// parent over stdin and stdout, on the database in $DATABASE_URL.
const benchChildMode = "_child"

// runBenchChild is one child process of a burn-down with --processes.
func runBenchChild(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if err := bench.RunChild(ctx, args, os.Getenv("DATABASE_URL"), os.Stdin, stdout); err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	return exitOK
}

// benchChildCommand starts children from this very binary, on the
// database at connString, passed in the environment rather than on the
// command line, where ps would show its password.
func benchChildCommand(connString string) (bench.ChildCommand, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the pgqueue binary for the child processes: %w", err)
	}
	return func(ctx context.Context, args []string) *exec.Cmd {
		c := exec.CommandContext(ctx, exe, append([]string{"bench", benchChildMode}, args...)...)
		c.Env = append(os.Environ(), "DATABASE_URL="+connString)
		return c
	}, nil
}
