package pgserver

import (
	"errors"
	"testing"
)

func TestFindBinaries(t *testing.T) {
	t.Parallel()
	errNotFound := errors.New("not found")
	tests := []struct {
		name     string
		path     map[string]string // program -> path on PATH
		pgConfig string            // bindir; "" means pg_config is missing
		globbed  []string
		exec     map[string]bool
		want     Binaries
		wantErr  bool
	}{
		{
			name: "OnPath",
			path: map[string]string{"initdb": "/usr/local/bin/initdb", "postgres": "/usr/local/bin/postgres"},
			want: Binaries{Initdb: "/usr/local/bin/initdb", Postgres: "/usr/local/bin/postgres"},
		},
		{
			name:     "PgConfigWhenPathLacksPostgres",
			path:     map[string]string{"initdb": "/usr/local/bin/initdb"},
			pgConfig: "/opt/pg/bin",
			exec:     map[string]bool{"/opt/pg/bin/initdb": true, "/opt/pg/bin/postgres": true},
			want:     Binaries{Initdb: "/opt/pg/bin/initdb", Postgres: "/opt/pg/bin/postgres"},
		},
		{
			name:    "HighestCompleteVersion",
			globbed: []string{"/usr/lib/postgresql/9.6/bin", "/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/10/bin", "/usr/lib/postgresql/16/bin"},
			exec: map[string]bool{
				"/usr/lib/postgresql/9.6/bin/initdb": true, "/usr/lib/postgresql/9.6/bin/postgres": true,
				"/usr/lib/postgresql/10/bin/initdb": true, "/usr/lib/postgresql/10/bin/postgres": true,
				"/usr/lib/postgresql/15/bin/initdb": true, "/usr/lib/postgresql/15/bin/postgres": true,
				"/usr/lib/postgresql/16/bin/psql": true, // client only
			},
			want: Binaries{Initdb: "/usr/lib/postgresql/15/bin/initdb", Postgres: "/usr/lib/postgresql/15/bin/postgres"},
		},
		{
			name:     "ErrorIfNone",
			pgConfig: "/usr/bin",
			globbed:  []string{"/usr/lib/postgresql/16/bin"},
			wantErr:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := binaryLookup{
				lookPath: func(file string) (string, error) {
					if p, ok := tt.path[file]; ok {
						return p, nil
					}
					return "", errNotFound
				},
				pgConfigBindir: func() (string, error) {
					if tt.pgConfig == "" {
						return "", errNotFound
					}
					return tt.pgConfig, nil
				},
				glob:         func(string) ([]string, error) { return tt.globbed, nil },
				isExecutable: func(path string) bool { return tt.exec[path] },
			}
			got, err := l.find()
			if tt.wantErr {
				if !errors.Is(err, errNoBinaries) {
					t.Fatalf("err = %v, want errNoBinaries", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
