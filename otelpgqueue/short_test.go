package otelpgqueue_test

import "testing"

// skipInShortMode skips a test under -short, saying what it leaves out:
// what make test-short trades for its speed.
func skipInShortMode(t *testing.T, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("skipped in -short mode: %s", what)
	}
}
