package pgtest

import "testing"

func TestMaxConns(t *testing.T) {
	for _, c := range []struct {
		env          string
		max, perTest int
	}{
		{"", 40, 20},
		{"junk", 40, 20},
		{"0", 40, 20},
		{"100", 100, 20},
		{"8", 8, 8},
	} {
		t.Setenv(MaxConnsEnv, c.env)
		if got, per := MaxConns(), TestConns(); got != c.max || per != c.perTest {
			t.Errorf("%s=%q: MaxConns %d, TestConns %d; want %d, %d", MaxConnsEnv, c.env, got, per, c.max, c.perTest)
		}
	}
}
