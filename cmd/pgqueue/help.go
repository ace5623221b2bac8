package main

import (
	"context"
	"fmt"
	"io"
)

const helpUsage = `Usage: pgqueue help [command]

Shows the usage of pgqueue, or of one command: migrate, grants, jobs, queues,
workflows, stats, locks, enqueue, version, demo, bench, ui or help.
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
	case "grants":
		fmt.Fprint(stdout, grantsUsage)
	case "jobs":
		fmt.Fprint(stdout, jobsUsage)
	case "queues":
		fmt.Fprint(stdout, queuesUsage)
	case "workflows":
		fmt.Fprint(stdout, workflowsUsage)
	case "stats":
		fmt.Fprint(stdout, statsUsage)
	case "locks":
		fmt.Fprint(stdout, locksUsage)
	case "enqueue":
		fmt.Fprint(stdout, enqueueUsage)
	case "version":
		fmt.Fprint(stdout, versionUsage)
	case "demo":
		fmt.Fprint(stdout, demoUsage)
	case "bench":
		fmt.Fprint(stdout, benchUsage)
	case "ui":
		fmt.Fprint(stdout, uiUsage)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, helpUsage)
	default:
		return parseFailed("help", helpUsage, usagef("unknown command %q", args[0]), stdout, stderr)
	}
	return exitOK
}
