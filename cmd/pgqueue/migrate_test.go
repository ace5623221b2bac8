package main

import (
	"flag"
	"strings"
	"testing"
)

func TestParseMigrateArgs(t *testing.T) {
	t.Parallel()

	const url = "postgres://db"
	tests := []struct {
		args    string      // split on spaces
		want    migrateArgs // compared when wantErr is ""
		wantErr string      // a substring of the usage error
	}{
		{args: "up --database-url " + url, want: migrateArgs{action: "up"}},
		{args: "--database-url " + url + " up", want: migrateArgs{action: "up"}},
		{args: "--database-url=" + url + " --schema other up", want: migrateArgs{action: "up", dbFlags: dbFlags{schema: "other"}}},
		{args: "up --schema other --database-url " + url, want: migrateArgs{action: "up", dbFlags: dbFlags{schema: "other"}}},
		{args: "down 2 --database-url " + url, want: migrateArgs{action: "down", steps: 2}},
		{args: "down --all --database-url " + url, want: migrateArgs{action: "down", all: true}},
		{args: "--all down --database-url " + url, want: migrateArgs{action: "down", all: true}},
		{args: "version --database-url " + url, want: migrateArgs{action: "version"}},
		{args: "force 1 --database-url " + url, want: migrateArgs{action: "force", version: 1}},
		{args: "force -1 --database-url " + url, want: migrateArgs{action: "force", version: -1}},
		{args: "--database-url " + url + " force -- -1", want: migrateArgs{action: "force", version: -1}},

		{args: "-h", wantErr: flag.ErrHelp.Error()},
		{args: "--database-url " + url, wantErr: "missing subcommand"},
		{args: "sideways --database-url " + url, wantErr: `unknown subcommand "sideways"`},
		{args: "up now --database-url " + url, wantErr: "up takes no arguments"},
		{args: "version 1 --database-url " + url, wantErr: "version takes no arguments"},
		{args: "up --all --database-url " + url, wantErr: "--all only goes with down"},
		{args: "down --database-url " + url, wantErr: "down needs the number of migrations"},
		{args: "down 0 --database-url " + url, wantErr: "at least 1"},
		{args: "down -1 --database-url " + url, wantErr: "at least 1"},
		{args: "down two --database-url " + url, wantErr: `got "two"`},
		{args: "down 1 2 --database-url " + url, wantErr: "down needs the number of migrations"},
		{args: "down 1 --all --database-url " + url, wantErr: "not both"},
		{args: "force --database-url " + url, wantErr: "force needs the version"},
		{args: "force -2 --database-url " + url, wantErr: "a version number or -1"},
		{args: "force 1 2 --database-url " + url, wantErr: "force needs the version"},
		{args: "up --schema pg-queue --database-url " + url, wantErr: "invalid --schema"},
		{args: "up --database-url=", wantErr: "no database"},
		{args: "up --frob --database-url " + url, wantErr: "flag provided but not defined"},
		{args: "up --database-url", wantErr: "flag needs an argument"},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			t.Parallel()
			got, err := parseMigrateArgs(strings.Split(tt.args, " "))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.databaseURL = url
			if want.schema == "" {
				want.schema = "pgqueue"
			}
			if got != want {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}
