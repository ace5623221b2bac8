// Package sqlschema validates and quotes the schema pgqueue's objects live
// in, and loads embedded .sql files with the schema filled in. Both the
// job queue and the lock package use it, so a schema name means the same
// in both.
package sqlschema

import (
	"fmt"
	"io/fs"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/pgqueuetype"

	"github.com/pgqueue/pgqueue/migrations"
)

// Default is the schema used when none is configured.
const Default = "pgqueue"

// pattern is what a schema name must match: a lower-case SQL identifier of
// at most 63 bytes. It is quoted wherever it is used all the same.
var pattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ErrInvalid is returned for a schema name that does not match the
// pattern. It matches pgqueuetype.ErrInvalid.
var ErrInvalid = fmt.Errorf("%w schema name", pgqueuetype.ErrInvalid)

// Validate returns ErrInvalid, with the name and the rule, when name is not
// a valid schema name.
func Validate(name string) error {
	if !pattern.MatchString(name) {
		return fmt.Errorf("%w: %q does not match %s", ErrInvalid, name, pattern)
	}
	return nil
}

// Quote returns name as a quoted SQL identifier.
func Quote(name string) string { return pgx.Identifier{name}.Sanitize() }

// Fill replaces the schema placeholder in sql with the quoted schema.
func Fill(sql, schema string) string {
	return strings.ReplaceAll(sql, migrations.SchemaPlaceholder, Quote(schema))
}

// Load reads dir/<name>.sql from fsys for every name in dst, fills in the
// schema (which must be valid) and stores the statement in *dst[name].
func Load(fsys fs.FS, dir, schema string, dst map[string]*string) error {
	if err := Validate(schema); err != nil {
		return err
	}
	for name, out := range dst {
		b, err := fs.ReadFile(fsys, dir+"/"+name+".sql")
		if err != nil {
			return fmt.Errorf("pgqueue: load query %s: %w", name, err)
		}
		*out = Fill(string(b), schema)
	}
	return nil
}
