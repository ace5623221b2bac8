package pgbouncer_test

import (
	"strings"
	"testing"

	shipped "github.com/pgqueue/pgqueue/deploy/pgbouncer"
	"github.com/pgqueue/pgqueue/internal/pgbouncer"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

// substituted are the [pgbouncer] settings Start replaces in the shipped
// file: where it listens, its files and its admin user.
var substituted = map[string]bool{"listen_addr": true, "listen_port": true, "unix_socket_dir": true,
	"auth_file": true, "admin_users": true, "logfile": true, "pidfile": true}

// shippedSettings returns the [pgbouncer] settings of the shipped
// pgbouncer.ini.
func shippedSettings(t *testing.T) map[string]string {
	t.Helper()
	settings := map[string]string{}
	section := ""
	for line := range strings.Lines(shipped.INI) {
		if trimmed := strings.TrimSpace(line); strings.HasPrefix(trimmed, "[") {
			section = strings.Trim(trimmed, "[]")
			continue
		}
		if key, value, ok := pgbouncer.Setting(line); ok && section == "pgbouncer" {
			if _, dup := settings[key]; dup {
				t.Errorf("the shipped pgbouncer.ini sets %s twice", key)
			}
			settings[key] = value
		}
	}
	return settings
}

// The PgBouncer the tests run has every setting of the shipped
// pgbouncer.ini in force, as the admin console's SHOW CONFIG reports it,
// except the few Start replaces: a setting misspelt, dropped by the
// template or refused by PgBouncer shows here.
func TestShippedSettingsInForce(t *testing.T) {
	t.Parallel()
	s := pgbouncer.Require(t, pgtest.DB().NewDatabase(t), nil)
	inForce, err := s.ShowConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := shippedSettings(t)
	if want["pool_mode"] != "transaction" {
		t.Fatalf("the shipped pool_mode is %q, want transaction", want["pool_mode"])
	}
	checked := 0
	for key, value := range want {
		got, ok := inForce[key]
		switch {
		case !ok:
			t.Errorf("%s: set in the shipped file, unknown to PgBouncer's SHOW CONFIG", key)
		case substituted[key]:
		case got != value:
			t.Errorf("%s = %q in force, want the shipped %q", key, got, value)
		default:
			checked++
		}
	}
	for key := range substituted {
		if _, ok := want[key]; !ok {
			t.Errorf("the shipped file does not set %s, which Start replaces", key)
		}
	}
	if checked < 20 {
		t.Errorf("%d shipped settings checked, want the file's 20 or more", checked)
	}
	if got := inForce["listen_port"]; !strings.Contains(s.ConnString("x"), ":"+got+"/") {
		t.Errorf("listen_port %s in force, not the port of %s", got, s.ConnString("x"))
	}
}

// Options.PoolSize replaces the shipped default_pool_size and nothing
// else.
func TestPoolSizeOverride(t *testing.T) {
	t.Parallel()
	s := pgbouncer.Require(t, pgtest.DB().NewDatabase(t), &pgbouncer.Options{PoolSize: 3})
	inForce, err := s.ShowConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := shippedSettings(t)
	if want["default_pool_size"] == "3" {
		t.Fatal("the shipped default_pool_size is 3 already: the override would not show")
	}
	if got := inForce["default_pool_size"]; got != "3" {
		t.Errorf("default_pool_size = %q in force, want the override 3", got)
	}
	for _, key := range []string{"pool_mode", "max_client_conn", "query_wait_timeout"} {
		if inForce[key] != want[key] {
			t.Errorf("%s = %q in force, want the shipped %q", key, inForce[key], want[key])
		}
	}
}

// Render sends every database to the upstream, replaces the settings it
// is given, and refuses one the file does not set: a test that replaced
// it would run a setting the shipped file never had.
func TestRender(t *testing.T) {
	t.Parallel()
	ini := "[databases]\napp = host=db port=5432\n[pgbouncer]\n;; a comment\nlisten_port = 6432\npool_mode = transaction\n"
	got, err := pgbouncer.Render(ini, "host=127.0.0.1 port=5", map[string]string{"listen_port": "7"})
	if err != nil {
		t.Fatal(err)
	}
	want := "[databases]\n* = host=127.0.0.1 port=5\n[pgbouncer]\n;; a comment\nlisten_port = 7\npool_mode = transaction\n"
	if got != want {
		t.Errorf("Render:\n%s\nwant:\n%s", got, want)
	}
	if _, err := pgbouncer.Render(ini, "host=x", map[string]string{"max_prepared_statements": "100"}); err == nil {
		t.Error("Render of a setting the file does not set: no error")
	}
}
