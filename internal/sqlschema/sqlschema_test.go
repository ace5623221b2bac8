package sqlschema

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"
)

func TestValidate(t *testing.T) {
	for _, name := range []string{"pgqueue", "_x", "a1_b2", strings.Repeat("a", 63)} {
		if err := Validate(name); err != nil {
			t.Errorf("Validate(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"", "Pgqueue", "1abc", "a-b", `a"b`, "a b", strings.Repeat("a", 64)} {
		if err := Validate(name); !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%q) = %v, want ErrInvalid", name, err)
		}
	}
}

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"sql/one.sql": {Data: []byte("SELECT 1 FROM {{schema}}.jobs JOIN {{schema}}.leases ON true")},
	}
	var one string
	if err := Load(fsys, "sql", "my_schema", map[string]*string{"one": &one}); err != nil {
		t.Fatal(err)
	}
	if want := `SELECT 1 FROM "my_schema".jobs JOIN "my_schema".leases ON true`; one != want {
		t.Errorf("got %q, want %q", one, want)
	}
	var missing string
	if err := Load(fsys, "sql", "my_schema", map[string]*string{"missing": &missing}); err == nil {
		t.Error("a missing file loaded")
	}
	if err := Load(fsys, "sql", "Bad", map[string]*string{"one": &one}); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid schema: got %v, want ErrInvalid", err)
	}
}
