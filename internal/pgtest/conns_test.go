package pgtest

import (
	"runtime"
	"testing"
)

func TestMaxConns(t *testing.T) {
	shared := max(20, 40/runtime.GOMAXPROCS(0))
	per := 19
	if testing.Short() {
		per = 9
	}
	for _, c := range []struct {
		env, url     string
		max, perTest int
	}{
		{"", "", 40, per},
		{"junk", "", 40, per},
		{"0", "", 40, per},
		{"100", "", 100, per},
		{"8", "", 8, 6}, // the harness holds 2
		{"3", "", 3, 2}, // and 1 of a budget under 4
		{"1", "", 1, 1}, // a test holds 1 at least
		{"", "postgres://shared/db", shared, min(per, shared-2)},
		{"100", "postgres://shared/db", 100, per},
	} {
		t.Setenv(MaxConnsEnv, c.env)
		t.Setenv("DATABASE_URL", c.url)
		if got, per := MaxConns(), TestConns(); got != c.max || per != c.perTest {
			t.Errorf("%s=%q DATABASE_URL=%q: MaxConns %d, TestConns %d; want %d, %d", MaxConnsEnv, c.env, c.url, got, per, c.max, c.perTest)
		}
	}
}

func TestNeedConns(t *testing.T) {
	for _, c := range []struct {
		env, url string
		runs     bool
	}{
		{"", "", true},                        // own server: sized for it
		{"", "postgres://shared/db", false},   // shared: over the default budget
		{"70", "postgres://shared/db", true},  // shared, with the budget raised
		{"30", "postgres://shared/db", false}, // shared, the budget still short
	} {
		t.Setenv(MaxConnsEnv, c.env)
		t.Setenv("DATABASE_URL", c.url)
		ran := false
		t.Run("", func(t *testing.T) {
			NeedConns(t, 64, "eight worker processes")
			ran = true
		})
		if ran != c.runs {
			t.Errorf("%s=%q DATABASE_URL=%q: ran %v, want %v", MaxConnsEnv, c.env, c.url, ran, c.runs)
		}
	}
}
