package main

import (
	"context"
	"fmt"
	"io"
)

const helpUsage = `Usage: pgqueue help [command]

Shows the usage of pgqueue, or of one command: migrate, demo, bench or help.
`

// runHelp prints the usage asked for on stdout.
func runHelp(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stdout, mainUsage)
		return exitOK
	}
	if len(args) > 1 {
		return parseFailed("help", helpUsage, usagef("want at most one command, got %d arguments", len(args)), stdout, stderr)
	}
	switch args[0] {
	case "migrate":
		fmt.Fprint(stdout, migrateUsage)
	case "demo":
		fmt.Fprint(stdout, demoUsage)
	case "bench":
		fmt.Fprint(stdout, benchUsage)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, helpUsage)
	default:
		return parseFailed("help", helpUsage, usagef("unknown command %q", args[0]), stdout, stderr)
	}
	return exitOK
}
