package pgqueue_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
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

// TestDocsLinksResolve keeps every relative link of the README and docs/
// pointing at a file that exists and, for a Markdown file, at a heading it
// has.
func TestDocsLinksResolve(t *testing.T) {
	files := []string{"README.md"}
	err := filepath.WalkDir("docs", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(withoutCode(string(text)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			if path == "" {
				path = file
			} else {
				path = filepath.Join(filepath.Dir(file), path)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %s: no such file %s", file, target, path)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !hasHeading(t, path, anchor) {
				t.Errorf("%s: link %s: %s has no heading #%s", file, target, path, anchor)
			}
		}
	}
}

// withoutCode drops fenced code blocks, whose brackets are not links.
func withoutCode(text string) string {
	var out []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// hasHeading reports whether the Markdown file has a heading whose
// GitHub anchor is anchor.
func hasHeading(t *testing.T, path, anchor string) bool {
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(withoutCode(string(text)), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var slug strings.Builder
		for _, r := range strings.ToLower(heading) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				slug.WriteRune(r)
			case r == ' ':
				slug.WriteRune('-')
			}
		}
		if slug.String() == anchor {
			return true
		}
	}
	return false
}
