package pgqueue_test

import (
	"os"
	"strings"
	"testing"
)

// TestDesignClaimMatchesSQL keeps the claim statement shown in
// docs/dev/design.md the one sql/claim.sql holds.
func TestDesignClaimMatchesSQL(t *testing.T) {
	design, err := os.ReadFile("docs/dev/design.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(design), "\n## Claim\n")
	if !ok {
		t.Fatal("docs/dev/design.md has no Claim section")
	}
	_, block, ok := strings.Cut(section, "```sql\n")
	if !ok {
		t.Fatal("the Claim section shows no SQL")
	}
	block, _, _ = strings.Cut(block, "```")

	file, err := os.ReadFile("internal/jobsql/sql/claim.sql")
	if err != nil {
		t.Fatal(err)
	}
	var statement []string
	for _, line := range strings.Split(string(file), "\n") {
		if !strings.HasPrefix(line, "--") {
			statement = append(statement, line)
		}
	}
	if got, want := strings.TrimSpace(block), strings.TrimSpace(strings.Join(statement, "\n")); got != want {
		t.Errorf("docs/dev/design.md shows a claim statement that is not sql/claim.sql's:\n--- docs ---\n%s\n--- sql/claim.sql ---\n%s", got, want)
	}
}
