// Package schemaversion reads the migration version of a pgqueue schema
// without changing anything: pgqueue.NewMigrator creates the schema and
// its version table, which a read-only command or a readiness check must
// not do.
package schemaversion

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/sqlschema"
	"github.com/pgqueue/pgqueue/migrations"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

// Querier is what Read needs of a pool, a connection or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Version is what Read found.
type Version struct {
	// Migrated reports whether the schema has a version table at all;
	// false for a schema never migrated (or missing).
	Migrated bool
	// Version is the applied version, 0 when none.
	Version uint
	// Dirty reports that the last migration failed half-way.
	Dirty bool
}

// Read returns the migration state of schema, which must be valid.
func Read(ctx context.Context, db Querier, schema string) (Version, error) {
	var exists, read string
	if err := sqlschema.Load(sqlFiles, "sql", schema, map[string]*string{"exists": &exists, "read": &read}); err != nil {
		return Version{}, err
	}
	var v Version
	if err := db.QueryRow(ctx, exists).Scan(&v.Migrated); err != nil {
		return Version{}, fmt.Errorf("read schema version: %w", err)
	}
	if !v.Migrated {
		return v, nil
	}
	var version int64
	err := db.QueryRow(ctx, read).Scan(&version, &v.Dirty)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return v, nil
	case err != nil:
		return Version{}, fmt.Errorf("read schema version: %w", err)
	}
	if version > 0 {
		v.Version = uint(version)
	}
	return v, nil
}

// Latest returns the highest version among the migration files this
// binary carries: the version its queries expect.
func Latest() uint {
	names, _ := fs.Glob(migrations.FS, "*.up.sql")
	var latest uint
	for _, name := range names {
		n, err := strconv.ParseUint(strings.SplitN(name, "_", 2)[0], 10, 32)
		if err == nil && uint(n) > latest {
			latest = uint(n)
		}
	}
	return latest
}
