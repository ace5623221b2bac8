package pgtest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue/internal/pgserver"
)

func TestChoose(t *testing.T) {
	t.Parallel()
	errMissing := errors.New("missing")
	bin := pgserver.Binaries{Initdb: "/pg/bin/initdb", Postgres: "/pg/bin/postgres"}
	found := func() (pgserver.Binaries, error) { return bin, nil }
	notFound := func() (pgserver.Binaries, error) { return pgserver.Binaries{}, errMissing }
	dockerUp := func(context.Context) error { return nil }
	dockerDown := func(context.Context) error { return errMissing }
	env := func(url string) func(string) string {
		return func(key string) string {
			if key == "DATABASE_URL" {
				return url
			}
			return ""
		}
	}

	tests := []struct {
		name string
		p    probe
		want plan
	}{
		{"DatabaseURLFirst", probe{env("postgres://u@h/db"), found, dockerUp},
			plan{source: SourceDatabaseURL, databaseURL: "postgres://u@h/db"}},
		{"LocalBeforeDocker", probe{env(""), found, dockerUp}, plan{source: SourceLocal, bin: bin}},
		{"DockerLast", probe{env(""), notFound, dockerUp}, plan{source: SourceTestcontainers}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.p.choose(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("plan = %+v, want %+v", got, tt.want)
			}
		})
	}

	t.Run("ErrorIfNothingAvailable", func(t *testing.T) {
		t.Parallel()
		_, err := probe{env(""), notFound, dockerDown}.choose(t.Context())
		if !errors.Is(err, ErrNoServer) {
			t.Fatalf("err = %v, want ErrNoServer", err)
		}
		t.Log(err)
		for _, want := range []string{"DATABASE_URL=postgres://", "CREATE DATABASE", "apt-get install postgresql", "Docker"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error does not mention %q:\n%v", want, err)
			}
		}
	})
}

// The Docker check runs its helper module: it must build and answer
// either way (its own test checks that the answer comes quickly).
func TestPingDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: builds and runs the Docker fallback helper")
	}
	t.Parallel()
	err := pingDocker(t.Context())
	if err == nil {
		t.Skip("Docker answers here")
	}
	t.Logf("no Docker: %v", err)
	if !errors.Is(err, errNoDocker) {
		if errors.Is(err, errNoDockerHelper) && os.Getenv("CI") != "true" {
			t.Skipf("the helper does not run (offline with its modules not downloaded?): %v", err)
		}
		t.Errorf("err = %v, want errNoDocker", err)
	}
}

func TestStartDatabaseURLUnreachable(t *testing.T) {
	t.Parallel()
	// Port 1 on loopback refuses at once.
	_, err := startDatabaseURL(t.Context(), "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2")
	if err == nil || !strings.Contains(err.Error(), "DATABASE_URL") {
		t.Errorf("err = %v, want a DATABASE_URL connect error", err)
	}
}

func TestStartFromLocalBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: starts one more server from the local binaries")
	}
	t.Parallel()
	p := systemProbe()
	p.getenv = func(string) string { return "" } // whatever DATABASE_URL says
	p.pingDocker = func(context.Context) error {
		t.Error("docker asked although binaries exist")
		return nil
	}
	begin := time.Now()
	s, err := p.start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Start from local binaries took %v", time.Since(begin).Round(time.Millisecond))
	t.Cleanup(func() { _ = s.Close() })
	if s.Source() != SourceLocal {
		t.Errorf("Source = %q, want %q", s.Source(), SourceLocal)
	}
	var user, db string
	err = connect(t, s.ConnString("template1")).QueryRow(t.Context(),
		`SELECT current_user, current_database()`).Scan(&user, &db)
	if err != nil {
		t.Fatal(err)
	}
	if user != "postgres" || db != "template1" {
		t.Errorf("connected as %s to %s, want postgres to template1", user, db)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
