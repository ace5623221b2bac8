package workerkit_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue"
)

// /readyz answers 503 while the schema is dropped under the running
// worker (migrate down --all --ignore-active), and 200 again once it is
// migrated up. Before, it answered 200 "ready" all along, while the
// worker could claim nothing.
func TestProcessReadyzFollowsTheSchema(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "a worker process's /readyz following the schema")
	b := setup(t)
	c := startChild(t, b.url, "--http-addr", "127.0.0.1:0")
	c.waitStatus("/readyz", http.StatusOK)
	mg, err := pgqueue.NewMigrator(t.Context(), b.pool, pgqueue.SchemaDefault)
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	if _, err := mg.Down(t.Context(), 0); err != nil { // every migration
		t.Fatal(err)
	}
	if body := c.waitStatus("/readyz", http.StatusServiceUnavailable); !strings.HasPrefix(body, "schema not ready") {
		t.Errorf("/readyz with the schema dropped: %q", body)
	}
	if code, _ := c.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d, want 200: the process lives on", code)
	}
	if _, err := mg.Up(t.Context()); err != nil {
		t.Fatal(err)
	}
	if body := c.waitStatus("/readyz", http.StatusOK); body != "ready\n" {
		t.Errorf("/readyz after migrating up: %q", body)
	}
}
