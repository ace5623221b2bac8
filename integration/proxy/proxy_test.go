package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/pgqueue/pgqueue/integration/proxy"
	"github.com/pgqueue/pgqueue/internal/pgserver"
)

var server *pgserver.Server

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	var err error
	server, err = pgserver.Start(ctx, pgserver.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxy tests need local PostgreSQL binaries:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := server.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

type testBundle struct {
	proxy  *proxy.Proxy
	direct string // connection string straight to the server
	viaP   string // the same through the proxy
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	direct := server.ConnString("postgres")
	p, err := proxy.New(fmt.Sprintf("127.0.0.1:%d", server.Port()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	viaP, err := p.ConnString(direct)
	if err != nil {
		t.Fatal(err)
	}
	return &testBundle{proxy: p, direct: direct, viaP: viaP}
}

func connect(t *testing.T, connString string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), connString)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// uniqueTable creates a table named for the test and returns its name.
func uniqueTable(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	name := "t_" + strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(t.Name()))
	if _, err := conn.Exec(t.Context(), "DROP TABLE IF EXISTS "+name+"; CREATE TABLE "+name+" (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestProxy(t *testing.T) {
	t.Parallel()

	t.Run("ForwardsQueriesAndTransactions", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		conn := connect(t, b.viaP)
		ctx := t.Context()

		// A reply larger than any buffer, and a query larger than one.
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM generate_series(1, 200000)").Scan(&n); err != nil || n != 200000 {
			t.Fatalf("count = %d, %v", n, err)
		}
		big := strings.Repeat("x", 1<<20)
		var got string
		if err := conn.QueryRow(ctx, "SELECT $1::text", big).Scan(&got); err != nil || got != big {
			t.Fatalf("echo of 1 MiB: len %d, %v", len(got), err)
		}

		table := uniqueTable(t, conn)
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := conn.Ping(ctx); err != nil {
			t.Fatalf("connection unusable after commit: %v", err)
		}
		if s := b.proxy.Stats(); s.Accepted != 1 || s.CommitsSeen != 1 || s.Faults() != 0 {
			t.Fatalf("stats = %+v, want 1 accepted, 1 commit, no faults", s)
		}
	})

	t.Run("AnswersSSLRequestWithN", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// sslmode=prefer asks for TLS first and goes on in the clear after 'N'.
		conn := connect(t, strings.Replace(b.viaP, "sslmode=disable", "sslmode=prefer", 1))
		var one int
		if err := conn.QueryRow(t.Context(), "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("select 1 = %d, %v", one, err)
		}
	})

	t.Run("DropCommitReplyCommitsButClientFails", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		direct := connect(t, b.direct)
		table := uniqueTable(t, direct)

		b.proxy.DropCommitReply(1)
		conn := connect(t, b.viaP)
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		commitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err = tx.Commit(commitCtx)
		if err == nil {
			t.Fatal("commit through a proxy dropping its reply succeeded")
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("commit hung instead of failing: %v", err)
		}
		var n int
		if err := direct.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("rows committed = %d, want 1: the commit should have reached the server", n)
		}
		if s := b.proxy.Stats(); s.CommitsSeen != 1 || s.CommitRepliesDropped != 1 {
			t.Fatalf("stats = %+v, want 1 commit seen and dropped", s)
		}
	})

	t.Run("DropCommitReplyLeavesOtherStatementsAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.proxy.DropCommitReply(1)
		conn := connect(t, b.viaP)
		for _, q := range []string{"SELECT 'commit'", "BEGIN", "SELECT 1", "ROLLBACK", "select 'COMMIT;'"} {
			if _, err := conn.Exec(t.Context(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		if s := b.proxy.Stats(); s.CommitsSeen != 0 || s.Faults() != 0 {
			t.Fatalf("stats = %+v, want no commit and no fault", s)
		}
	})

	t.Run("CutAllBreaksOpenConnections", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		conn := connect(t, b.viaP)
		if err := conn.Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := b.proxy.CutAll(); n != 1 {
			t.Fatalf("CutAll cut %d connections, want 1", n)
		}
		if err := conn.Ping(t.Context()); err == nil {
			t.Fatal("ping over a cut connection succeeded")
		}
		// New connections still work.
		again := connect(t, b.viaP)
		if err := again.Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
		// pgx may also open a connection for a cancel request: at least 2.
		if s := b.proxy.Stats(); s.Cuts != 1 || s.Accepted < 2 {
			t.Fatalf("stats = %+v, want 1 cut of at least 2 accepted", s)
		}
	})

	t.Run("CutRandomCutsConnections", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Connect first: at 99% a second the handshake itself may be cut.
		conn := connect(t, b.viaP)
		b.proxy.CutRandom(0.99)
		deadline := time.Now().Add(10 * time.Second)
		for conn.Ping(t.Context()) == nil {
			if time.Now().After(deadline) {
				t.Fatal("connection not cut within 10s at 99% a second")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if s := b.proxy.Stats(); s.Cuts < 1 {
			t.Fatalf("stats = %+v, want a cut", s)
		}
		b.proxy.CutRandom(0)
		again := connect(t, b.viaP)
		time.Sleep(200 * time.Millisecond)
		if err := again.Ping(t.Context()); err != nil {
			t.Fatalf("connection cut after random cuts were switched off: %v", err)
		}
	})

	t.Run("CloseEndsConnectionsAndWaits", func(t *testing.T) {
		t.Parallel()
		direct := server.ConnString("postgres")
		p, err := proxy.New(fmt.Sprintf("127.0.0.1:%d", server.Port()))
		if err != nil {
			t.Fatal(err)
		}
		viaP, err := p.ConnString(direct)
		if err != nil {
			t.Fatal(err)
		}
		conns := make([]*pgx.Conn, 3)
		for i := range conns {
			conns[i] = connect(t, viaP)
		}
		// One connection is mid-query when the proxy closes.
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = conns[0].Exec(context.Background(), "SELECT pg_sleep(30)")
		}()
		time.Sleep(100 * time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- p.Close() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not return within 5s")
		}
		wg.Wait()
		for i, c := range conns {
			if err := c.Ping(t.Context()); err == nil {
				t.Fatalf("connection %d works after Close", i)
			}
		}
		if _, err := pgx.Connect(t.Context(), viaP); err == nil {
			t.Fatal("connected to a closed proxy")
		}
		if err := p.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}
