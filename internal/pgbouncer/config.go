package pgbouncer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Render returns the PgBouncer configuration ini with its [databases]
// entries replaced by one that sends every database name to upstream (a
// libpq connection string: host and port), and the [pgbouncer] settings
// named in set given set's values. Everything else, comments included, is
// left as it is. A key of set the file does not set is an error: what a
// test replaces must be in the shipped file, so the test runs it.
func Render(ini, upstream string, set map[string]string) (string, error) {
	var b strings.Builder
	section := ""
	done := map[string]bool{}
	for line := range strings.Lines(ini) {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "[") && strings.HasSuffix(trimmed, "]") {
			section = strings.Trim(trimmed, "[]")
			b.WriteString(line)
			if section == "databases" {
				b.WriteString("* = " + upstream + "\n")
			}
			continue
		}
		key, _, isSetting := Setting(line)
		switch {
		case !isSetting:
		case section == "databases":
			continue // replaced by the line after the header
		case section == "pgbouncer":
			if v, ok := set[key]; ok {
				b.WriteString(key + " = " + v + "\n")
				done[key] = true
				continue
			}
		}
		b.WriteString(line)
	}
	for _, key := range slices.Sorted(maps.Keys(set)) {
		if !done[key] {
			return "", fmt.Errorf("pgbouncer: the shipped pgbouncer.ini does not set %s", key)
		}
	}
	return b.String(), nil
}

// Setting parses one line of a PgBouncer ini file: key and value of a
// "key = value" line, with ok false for a comment, a blank line or a
// section header.
func Setting(line string) (key, value string, ok bool) {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == ';' || line[0] == '#' || line[0] == '[' {
		return "", "", false
	}
	key, value, ok = strings.Cut(line, "=")
	return strings.TrimSpace(key), strings.TrimSpace(value), ok
}

// AdminConnString returns a connection string for PgBouncer's admin
// console (the database "pgbouncer"), as the upstream's user, whom Start
// makes an admin user.
func (s *Server) AdminConnString() string {
	return s.ConnString("pgbouncer")
}

// ShowConfig returns the settings in force, from the admin console's SHOW
// CONFIG: each key with its value as PgBouncer shows it.
func (s *Server) ShowConfig(ctx context.Context) (map[string]string, error) {
	conn, err := pgx.Connect(ctx, s.AdminConnString())
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: admin console: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// The console speaks the simple protocol only.
	rows, err := conn.Query(ctx, "SHOW CONFIG", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: show config: %w", err)
	}
	config := map[string]string{}
	for rows.Next() {
		// key, value, default, changeable: the first two as text.
		vals := rows.RawValues()
		if len(vals) < 2 {
			rows.Close()
			return nil, fmt.Errorf("pgbouncer: show config: %d columns, want at least 2", len(vals))
		}
		config[string(vals[0])] = string(vals[1])
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgbouncer: show config: %w", err)
	}
	return config, nil
}
