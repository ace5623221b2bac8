package pgtest

import (
	"runtime"
	"testing"
)

func TestMaxConns(t *testing.T) {
	shared := max(20, 40/runtime.GOMAXPROCS(0))
	for _, c := range []struct {
		env, url     string
		max, perTest int
	}{
		{"", "", 40, 20},
		{"junk", "", 40, 20},
		{"0", "", 40, 20},
		{"100", "", 100, 20},
		{"8", "", 8, 8},
		{"", "postgres://shared/db", shared, 20},
		{"100", "postgres://shared/db", 100, 20},
	} {
		t.Setenv(MaxConnsEnv, c.env)
		t.Setenv("DATABASE_URL", c.url)
		if got, per := MaxConns(), TestConns(); got != c.max || per != c.perTest {
			t.Errorf("%s=%q DATABASE_URL=%q: MaxConns %d, TestConns %d; want %d, %d", MaxConnsEnv, c.env, c.url, got, per, c.max, c.perTest)
		}
	}
}
