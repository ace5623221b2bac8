package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue"
)

func TestGrantsCommand(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"grants", "--schema", "jobs_x", "app"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want, err := pgqueue.GrantsSQL("jobs_x", "app")
	if err != nil {
		t.Fatal(err)
	}
	if stdout.String() != want || !strings.Contains(want, `GRANT USAGE ON SCHEMA "jobs_x" TO "app";`) {
		t.Fatalf("printed:\n%s\nwant:\n%s", stdout.String(), want)
	}
	for _, args := range [][]string{{"grants"}, {"grants", "a", "b"}, {"grants", "Bad"}, {"grants", "--schema", "X", "app"}} {
		stdout.Reset()
		stderr.Reset()
		if code := run(context.Background(), args, &stdout, &stderr); code != exitUsage {
			t.Fatalf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
}
