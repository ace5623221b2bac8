package workerkit_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgbouncer"
)

// Behind PgBouncer in transaction mode the worker works its jobs either
// way; --direct-database-url gives it notifications (no polling warning)
// and migrates through it, which the pooler would refuse.
func TestProcessBehindPgBouncer(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		direct  bool
		polling bool
	}{
		{name: "WithDirectURL", direct: true, polling: false},
		{name: "WithoutDirectURL", direct: false, polling: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			cfg, err := pgx.ParseConfig(b.url)
			if err != nil {
				t.Fatal(err)
			}
			// exec: pgx's default mode keeps prepared statements, which the
			// pooler would run in another backend (refused at start).
			pooled := pgbouncer.Require(t, b.url, nil).ConnString(cfg.Database) + "&default_query_exec_mode=exec"
			// With the direct URL, --migrate has a new schema to create,
			// which only the direct connection may do; without it the
			// schema is current and Migrate only reads its version.
			schema := pgqueue.SchemaDefault
			args := []string{"--migrate"}
			if tt.direct {
				schema = "kit_pooled"
				args = append(args, "--schema", schema, "--direct-database-url", b.url)
			}
			c := startChild(t, pooled, args...)
			client, err := pgqueue.New(b.pool, &pgqueue.Config{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			release := filepath.Join(t.TempDir(), "release")
			res, err := client.Enqueue(t.Context(), blockArgs{File: release}, nil)
			if err != nil {
				t.Fatal(err)
			}
			id := res.ID
			c.waitLine(fmt.Sprintf("started %d", id))
			if err := os.WriteFile(release, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			c.signal(syscall.SIGTERM)
			if code := c.wait(30 * time.Second); code != 0 {
				t.Fatalf("exit code %d\n%s", code, c.logs())
			}
			if polled := strings.Contains(c.logs(), "polling for jobs instead"); polled != tt.polling {
				t.Fatalf("polling warning logged: %v, want %v\n%s", polled, tt.polling, c.logs())
			}
		})
	}
}
