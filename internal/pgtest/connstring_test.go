package pgtest

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, db, want string
	}{
		{"URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "pgqueue_test_1",
			"postgres://postgres@127.0.0.1:5432/pgqueue_test_1?sslmode=disable"},
		{"URLPostgresqlScheme", "postgresql://u:p%40ss@db.example:6543/app?sslmode=disable&application_name=x", "other",
			"postgresql://u:p%40ss@db.example:6543/other?sslmode=disable&application_name=x"},
		{"URLWithoutDatabase", "postgres://u@localhost", "d", "postgres://u@localhost/d"},
		{"URLDbnameParamRemoved", "postgres://u@h/a?dbname=b&sslmode=disable", "c", "postgres://u@h/c?sslmode=disable"},
		{"URLDatabaseNeedsEscaping", "postgres://u@h/a", "we ird/db", "postgres://u@h/we%20ird%2Fdb"},
		{"URLSocketHostParam", "postgres:///a?host=/var/run/postgresql", "b", "postgres:///b?host=/var/run/postgresql"},
		{"DSN", "host=127.0.0.1 port=5432 user=postgres dbname=postgres sslmode=disable", "pgqueue_test_1",
			"host=127.0.0.1 port=5432 user=postgres dbname='pgqueue_test_1' sslmode=disable"},
		{"DSNWithoutDatabase", "host=localhost user=u", "d", "host=localhost user=u dbname='d'"},
		{"DSNQuotedAndSpaced", "host = localhost  password='a b\\'c' dbname = 'old db'\tuser=u", "new",
			"host=localhost password='a b\\'c' dbname='new' user=u"},
		{"DSNDatabaseNeedsQuoting", "host=h dbname=x", `it's \ odd`, `host=h dbname='it\'s \\ odd'`},
		{"DSNEmpty", "", "d", "dbname='d'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := withDatabase(tt.in, tt.db)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("withDatabase(%q, %q)\n got %q\nwant %q", tt.in, tt.db, got, tt.want)
			}
			// pgx must read it back with only the database changed.
			before, err := pgconn.ParseConfig(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			after, err := pgconn.ParseConfig(got)
			if err != nil {
				t.Fatalf("pgx cannot parse %q: %v", got, err)
			}
			if after.Database != tt.db {
				t.Errorf("database = %q, want %q", after.Database, tt.db)
			}
			if after.Host != before.Host || after.Port != before.Port || after.User != before.User || after.Password != before.Password {
				t.Errorf("rewriting changed more than the database: %+v -> %+v", before, after)
			}
		})
	}

	t.Run("ErrorIfMalformedDSN", func(t *testing.T) {
		t.Parallel()
		for _, in := range []string{"host", "host=h password='open", "=x"} {
			if got, err := withDatabase(in, "d"); err == nil {
				t.Errorf("withDatabase(%q) = %q, want error", in, got)
			}
		}
	})
}
