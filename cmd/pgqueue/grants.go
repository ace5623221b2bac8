package main

import (
	"context"
	"fmt"
	"io"

	"github.com/pgqueue/pgqueue"
)

const grantsUsage = `Usage: pgqueue grants [--schema NAME] ROLE

Prints the SQL that gives ROLE exactly what an application needs on
pgqueue's schema once another role applied the migrations: USAGE on the
schema; SELECT, INSERT, UPDATE and DELETE on its tables; USAGE on its
sequences; EXECUTE on its functions. Nothing to create anything: with
them, pgqueue.Migrate on a current schema reads its version and returns.
Run the output as the schema's owner (psql -f -), and again after each
migration that adds tables. It does not connect to a database.

Flags:

	--schema NAME  schema of pgqueue's tables (default "pgqueue")
`

func runGrants(_ context.Context, args []string, stdout, stderr io.Writer) int {
	var schema string
	fs := newFlagSet("grants")
	fs.StringVar(&schema, "schema", pgqueue.SchemaDefault, "")
	pos, err := parseInterspersed(fs, args)
	if err == nil && len(pos) != 1 {
		err = usagef("want one role, got %d arguments", len(pos))
	}
	if err != nil {
		return parseFailed("grants", grantsUsage, err, stdout, stderr)
	}
	sql, err := pgqueue.GrantsSQL(schema, pos[0])
	if err != nil {
		return parseFailed("grants", grantsUsage, usagef("%v", err), stdout, stderr)
	}
	fmt.Fprint(stdout, sql)
	return exitOK
}
