package workerkit

import (
	"maps"
	"strings"
	"testing"
	"time"
)

func TestParseSettings(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	tests := []struct {
		name     string
		args     []string
		getenv   func(string) string
		defaults Settings
		check    func(t *testing.T, s *Settings)
		wantErr  string
	}{
		{name: "KitDefaults", getenv: env("DATABASE_URL", "postgres://e"), check: func(t *testing.T, s *Settings) {
			if s.DatabaseURL != "postgres://e" || s.Schema != "pgqueue" || s.ShutdownTimeout != DefaultShutdownTimeout ||
				!maps.Equal(s.Queues, map[string]int{"default": 10}) || s.LogFormat != "auto" || s.HTTPAddr != "" || s.Migrate {
				t.Errorf("%+v", s)
			}
		}},
		{name: "EnvOverProgramDefaults", getenv: env("DATABASE_URL", "postgres://e", "PGQUEUE_QUEUES", "a=1,b=2", "PGQUEUE_SHUTDOWN_TIMEOUT", "5s", "PGQUEUE_MIGRATE", "true", "PGQUEUE_LOG_LEVEL", "debug"),
			defaults: Settings{Queues: map[string]int{"x": 3}, ShutdownTimeout: time.Minute},
			check: func(t *testing.T, s *Settings) {
				if !maps.Equal(s.Queues, map[string]int{"a": 1, "b": 2}) || s.ShutdownTimeout != 5*time.Second || !s.Migrate || s.LogLevel.String() != "DEBUG" {
					t.Errorf("%+v", s)
				}
			}},
		{name: "ProgramDefaults", getenv: env("DATABASE_URL", "postgres://e"), defaults: Settings{Queues: map[string]int{"x": 3}, HTTPAddr: ":9090"},
			check: func(t *testing.T, s *Settings) {
				if !maps.Equal(s.Queues, map[string]int{"x": 3}) || s.HTTPAddr != ":9090" {
					t.Errorf("%+v", s)
				}
			}},
		{name: "FlagsOverEnv", args: []string{"--database-url", "postgres://f", "--queues", "c=4", "--http-addr", ""},
			getenv: env("DATABASE_URL", "postgres://e", "PGQUEUE_QUEUES", "a=1", "PGQUEUE_HTTP_ADDR", ":1"),
			check: func(t *testing.T, s *Settings) {
				if s.DatabaseURL != "postgres://f" || !maps.Equal(s.Queues, map[string]int{"c": 4}) || s.HTTPAddr != "" {
					t.Errorf("%+v", s)
				}
			}},
		{name: "BadEnvNamed", getenv: env("DATABASE_URL", "postgres://e", "PGQUEUE_SHUTDOWN_TIMEOUT", "soon"), wantErr: "environment PGQUEUE_SHUTDOWN_TIMEOUT"},
		{name: "QueueTwice", args: []string{"--queues", "a=1,a=2"}, getenv: env("DATABASE_URL", "x"), wantErr: `"a" given twice`},
		{name: "QueueNoCount", args: []string{"--queues", "a"}, getenv: env("DATABASE_URL", "x"), wantErr: "want name=concurrency"},
		{name: "ShortLease", args: []string{"--job-lease", "10ms"}, getenv: env("DATABASE_URL", "x"), wantErr: "at least 1s"},
		{name: "BadLevel", args: []string{"--log-level", "loud"}, getenv: env("DATABASE_URL", "x"), wantErr: "log-level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _, err := parseSettings("w", tt.args, tt.getenv, tt.defaults, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, s)
		})
	}
}
