// Package migrations holds pgqueue's schema as golang-migrate files.
//
// Files are named NNNNNN_name.up.sql and NNNNNN_name.down.sql. Every object
// is written as {{schema}}.name; pgqueue.Migrate replaces the placeholder
// with the quoted schema name while applying them, so one set of files
// serves the default schema "pgqueue" and any schema a user chooses.
package migrations

import "embed"

// FS holds the migration files. Apply them with pgqueue.Migrate, which fills
// in the schema; golang-migrate's plain iofs source would leave the
// {{schema}} placeholder in place.
//
//go:embed *.sql
var FS embed.FS

// SchemaPlaceholder is the token in the files that stands for the quoted
// schema name.
const SchemaPlaceholder = "{{schema}}"

// ChannelPlaceholder is the token in the files that stands for the name of
// the NOTIFY channel of the schema's inserts, unquoted (it is written
// inside a string literal).
const ChannelPlaceholder = "{{channel}}"
