package main

import "testing"

// The mutants follow the code: a change that moves a mutant's text away
// fails here, in the suite, rather than at the next mutation run.
func TestEveryMutantMatchesOnce(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range mutants {
		if names[m.name] {
			t.Errorf("mutant %s is listed twice", m.name)
		}
		names[m.name] = true
		if err := m.check(root); err != nil {
			t.Error(err)
		}
	}
}
