package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

// TestUIServes runs "pgqueue ui" on a free port, fetches its pages, and
// stops it as an interrupt would.
func TestUIServes(t *testing.T) {
	t.Parallel()
	url := pgtest.DB().NewDatabase(t)
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pgqueue.Migrate(t.Context(), pool, pgqueue.SchemaDefault); err != nil {
		t.Fatal(err)
	}
	client, err := pgqueue.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(t.Context(), opsJob{N: 1}, &pgqueue.EnqueueOpts{Queue: "uiq"}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out, outW := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"ui", "--listen", "127.0.0.1:0", "--read-only", "--prefix", "/q", "--database-url", url}, outW, &stderr)
		outW.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("no address printed: %v (stderr %s)", err, stderr.String())
	}
	go io.Copy(io.Discard, out)
	m := regexp.MustCompile(`serving (http://\S+/) \(read-only\)`).FindStringSubmatch(line)
	if m == nil || !strings.HasSuffix(m[1], "/q/") {
		t.Fatalf("printed %q", line)
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `<tr data-queue="uiq">`) || !strings.Contains(string(body), `id="read-only"`) {
		t.Fatalf("overview: %d\n%s", resp.StatusCode, body)
	}
	cancel()
	if c := <-code; c != exitOK {
		t.Fatalf("exit %d, stderr %s", c, stderr.String())
	}
}

func TestUIUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ui", "extra", "--database-url", "postgres://x"}, "takes no arguments"},
		{[]string{"ui", "--prefix", "q/", "--database-url", "postgres://127.0.0.1:1/x"}, "Prefix"},
		{[]string{"ui", "--database-url", ""}, "no database"},
	} {
		var stdout, stderr bytes.Buffer
		if c := run(t.Context(), tc.args, &stdout, &stderr); c != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q", tc.args, c, stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if c := run(t.Context(), []string{"help", "ui"}, &stdout, &stderr); c != exitOK || !strings.Contains(stdout.String(), "--read-only") {
		t.Errorf("help ui: %d %q", c, stdout.String())
	}
}
