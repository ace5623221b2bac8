// Package pgbouncer holds the PgBouncer configuration pgqueue ships,
// pgbouncer.ini and its auth file userlist.txt, for operators to copy (see
// docs/guides/poolers.md). The Go side only embeds them, so that
// pgqueue's tests run PgBouncer from exactly these files.
package pgbouncer

import _ "embed"

// INI is pgbouncer.ini: transaction pooling, commented.
//
//go:embed pgbouncer.ini
var INI string

// Userlist is userlist.txt, the auth file pgbouncer.ini names: comments
// and commented-out example lines only.
//
//go:embed userlist.txt
var Userlist string
