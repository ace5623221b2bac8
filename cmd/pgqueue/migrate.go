package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/schemaversion"
)

const migrateUsage = `Usage: pgqueue migrate [flags] up | down N | down --all | version | force V

Applies, reverts or inspects pgqueue's migrations in one schema. Processes
that migrate the same schema at once take turns: each migration is applied
once.

Subcommands:

	up          apply every migration not yet applied; on a current
	            schema it only reads, so it works through a pooler too
	down N      revert the last N migrations
	down --all  revert every migration: drops pgqueue's tables and their jobs
	version     print the applied version: "2", "2 (dirty)" or "none";
	            reads only: creates neither the schema nor its table
	force V     record version V (-1 for none) and clear the dirty flag,
	            without running any migration: after a failed migration
	            was repaired by hand

Flags, before or after the subcommand:

	--database-url URL  database to migrate (default: $DATABASE_URL)
	--schema NAME       schema of pgqueue's tables (default "pgqueue")
	--all               with down: revert every migration
	--ignore-active     with down: revert even while clients work the
	                    schema (refused otherwise: they would fail on
	                    every statement against the older schema)
	--json              with version: print JSON

A bare "down" is refused: say how many migrations to revert, or --all.
(golang-migrate's CLI reverts everything there; reverting the first
migration drops the jobs table.)
`

// migrateArgs is a parsed migrate command line.
type migrateArgs struct {
	dbFlags
	action  string // up, down, version or force
	steps   int    // down: how many to revert; 0 with --all
	all     bool   // down --all
	ignore  bool   // down --ignore-active
	json    bool   // version --json
	version int    // force: the version to record, -1 for none
}

func parseMigrateArgs(args []string) (migrateArgs, error) {
	var a migrateArgs
	fs := newFlagSet("migrate")
	a.register(fs, pgqueue.SchemaDefault)
	fs.BoolVar(&a.all, "all", false, "")
	fs.BoolVar(&a.ignore, "ignore-active", false, "")
	fs.BoolVar(&a.json, "json", false, "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return a, err
	}
	if len(pos) == 0 {
		return a, usagef("missing subcommand: up, down, version or force")
	}
	a.action, pos = pos[0], pos[1:]
	if a.all && a.action != "down" {
		return a, usagef("--all only goes with down")
	}
	if a.ignore && a.action != "down" {
		return a, usagef("--ignore-active only goes with down")
	}
	if a.json && a.action != "version" {
		return a, usagef("--json only goes with version")
	}
	switch a.action {
	case "up", "version":
		if len(pos) > 0 {
			return a, usagef("%s takes no arguments, got %q", a.action, pos)
		}
	case "down":
		switch {
		case a.all && len(pos) == 0:
		case a.all:
			return a, usagef("down takes N or --all, not both")
		case len(pos) != 1:
			return a, usagef("down needs the number of migrations to revert, or --all to revert them all")
		default:
			n, err := strconv.Atoi(pos[0])
			if err != nil || n < 1 {
				return a, usagef("down: N must be a whole number of at least 1, got %q", pos[0])
			}
			a.steps = n
		}
	case "force":
		if len(pos) != 1 {
			return a, usagef("force needs the version to record (-1 for none)")
		}
		v, err := strconv.Atoi(pos[0])
		if err != nil || v < -1 {
			return a, usagef("force: V must be a version number or -1, got %q", pos[0])
		}
		a.version = v
	default:
		return a, usagef("unknown subcommand %q: want up, down, version or force", a.action)
	}
	if err := a.checkSchema(); err != nil {
		return a, err
	}
	if a.databaseURL == "" {
		return a, usagef("no database: set --database-url or DATABASE_URL")
	}
	return a, nil
}

// runMigrate is the migrate command.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a, err := parseMigrateArgs(args)
	if err != nil {
		return parseFailed("migrate", migrateUsage, err, stdout, stderr)
	}
	if err := migrate(ctx, a, stdout); err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	return exitOK
}

func migrate(ctx context.Context, a migrateArgs, stdout io.Writer) error {
	pool, err := openPool(ctx, a.databaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if a.action == "version" {
		// Not through the Migrator: it creates the schema and its table.
		return printVersion(ctx, pool, a, stdout)
	}
	if a.action == "up" {
		// As a program's pgqueue.Migrate: a current schema is only read,
		// so this works through a pooler too.
		res, err := pgqueue.Migrate(ctx, pool, a.schema)
		if err != nil {
			return err
		}
		printResult(stdout, "migrated", a.schema, res)
		return nil
	}
	mg, err := pgqueue.NewMigrator(ctx, pool, a.schema)
	if err != nil {
		return err
	}
	defer mg.Close()

	switch a.action {
	case "down":
		if !a.ignore {
			if err := refuseWhileActive(ctx, pool, a.schema); err != nil {
				return err
			}
		}
		res, err := mg.Down(ctx, a.steps) // 0 steps: all of them
		if err != nil {
			return err
		}
		printResult(stdout, "reverted", a.schema, res)
	case "force":
		if err := mg.Force(ctx, a.version); err != nil {
			return err
		}
		if a.version < 0 {
			fmt.Fprintf(stdout, "forced %s to no version\n", a.schema)
		} else {
			fmt.Fprintf(stdout, "forced %s to version %d\n", a.schema, a.version)
		}
	}
	return nil
}

// printResult says what an up or down run did; a run with nothing to do is
// a success, said as such.
func printResult(w io.Writer, verb, schema string, res pgqueue.MigrateResult) {
	switch {
	case res.Changed():
		fmt.Fprintf(w, "%s %s from version %d to %d\n", verb, schema, res.From, res.To)
	case res.To == 0:
		fmt.Fprintf(w, "nothing to do: %s has no migrations applied\n", schema)
	default:
		fmt.Fprintf(w, "nothing to do: %s is at version %d\n", schema, res.To)
	}
}

// printVersion prints the schema's migration version, reading only.
func printVersion(ctx context.Context, pool *pgxpool.Pool, a migrateArgs, stdout io.Writer) error {
	v, err := schemaversion.Read(ctx, pool, a.schema)
	if err != nil {
		return err
	}
	if a.json {
		return writeJSON(stdout, struct {
			Version uint `json:"version"`
			Dirty   bool `json:"dirty"`
			Latest  uint `json:"latest"`
		}{v.Version, v.Dirty, schemaversion.Latest()})
	}
	switch {
	case v.Version == 0 && !v.Dirty:
		fmt.Fprintln(stdout, "none")
	case v.Dirty:
		fmt.Fprintf(stdout, "%d (dirty)\n", v.Version)
	default:
		fmt.Fprintln(stdout, v.Version)
	}
	return nil
}
