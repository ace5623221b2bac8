package pgqueue

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/internal/schemaversion"
	"github.com/pgqueue/pgqueue/internal/sqlschema"
)

// readSchemaVersion reads schema's migration state, creating nothing. A
// connection failure says so: it is not a failure of the first statement.
func readSchemaVersion(ctx context.Context, pool *pgxpool.Pool, schema string) (schemaversion.Version, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return schemaversion.Version{}, dbError("migrate: connect", err)
	}
	defer conn.Release()
	v, err := schemaversion.Read(ctx, conn, schema)
	if err != nil {
		return schemaversion.Version{}, dbError("migrate", err)
	}
	return v, nil
}

// schemaCurrent reports whether schema is at the
// latest version this binary carries, clean, and returns that version.
func schemaCurrent(ctx context.Context, pool *pgxpool.Pool, schema string) (uint, bool, error) {
	if pool == nil {
		return 0, false, errNilPool
	}
	if err := sqlschema.Validate(schema); err != nil {
		return 0, false, err
	}
	v, err := readSchemaVersion(ctx, pool, schema)
	if err != nil {
		return 0, false, err
	}
	if v.Migrated && !v.Dirty && v.Version == schemaversion.Latest() {
		return v.Version, true, nil
	}
	return 0, false, nil
}

// GrantsSQL returns the SQL statements, one per line, that give role what an
// application role needs on schema (SchemaDefault, or Config.Schema) once another
// role applied the migrations: USAGE on the schema, SELECT, INSERT, UPDATE
// and DELETE on its tables, USAGE on its sequences and EXECUTE on its
// functions. Nothing more: no CREATE, no ownership. Run them as the
// schema's owner, and again after applying new migrations. role must be
// a lower-case SQL identifier like a schema name (ErrInvalid).
func GrantsSQL(schema, role string) (string, error) {
	if err := sqlschema.Validate(schema); err != nil {
		return "", err
	}
	if err := sqlschema.Validate(role); err != nil {
		return "", fmt.Errorf("%w role name: %q", ErrInvalid, role)
	}
	grants, err := jobsql.Grants(schema)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	for _, line := range strings.Split(grants, "\n") {
		if line == "" || strings.HasPrefix(line, "--") {
			continue
		}
		out.WriteString(strings.ReplaceAll(line, "{{role}}", sqlschema.Quote(role)) + "\n")
	}
	return out.String(), nil
}
