package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/pgqueue/pgqueue/internal/schemaversion"
)

const versionUsage = `Usage: pgqueue version [--json]

Prints the version of this pgqueue binary, the Go version it was built
with, and the schema version its migrations reach. It does not connect
to a database: "pgqueue migrate version" reads a schema's version.
`

type versionJSON struct {
	Version       string `json:"version"`
	Go            string `json:"go"`
	SchemaVersion uint   `json:"schema_version"`
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	var asJSON bool
	fs := newFlagSet("version")
	fs.BoolVar(&asJSON, "json", false, "")
	pos, err := parseInterspersed(fs, args)
	if err == nil && len(pos) > 0 {
		err = usagef("version takes no arguments, got %q", pos)
	}
	if err != nil {
		return parseFailed("version", versionUsage, err, stdout, stderr)
	}
	v := versionJSON{Version: "(devel)", Go: runtime.Version(), SchemaVersion: schemaversion.Latest()}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		v.Version = info.Main.Version
	}
	if asJSON {
		if err := writeJSON(stdout, v); err != nil {
			fmt.Fprintln(stderr, err)
			return exitError
		}
		return exitOK
	}
	fmt.Fprintf(stdout, "pgqueue %s (%s), schema version %d\n", v.Version, v.Go, v.SchemaVersion)
	return exitOK
}
