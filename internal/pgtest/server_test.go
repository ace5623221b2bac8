package pgtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestChoose(t *testing.T) {
	t.Parallel()
	errMissing := errors.New("missing")
	bin := binaries{initdb: "/pg/bin/initdb", postgres: "/pg/bin/postgres"}
	found := func() (binaries, error) { return bin, nil }
	notFound := func() (binaries, error) { return binaries{}, errNoBinaries }
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

func TestPingDockerFailsFast(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), dockerPingTimeout)
	defer cancel()
	begin := time.Now()
	err := pingDocker(ctx)
	elapsed := time.Since(begin)
	if err == nil {
		t.Skip("Docker answers here")
	}
	t.Logf("no Docker (%v): %v", elapsed.Round(time.Millisecond), err)
	if elapsed > dockerPingTimeout+time.Second {
		t.Errorf("ping took %v, want at most about %v", elapsed, dockerPingTimeout)
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
