package notifier

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/pgqueue/pgqueue/internal/pgtest"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m, func(context.Context, string) error { return nil })
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// dropper starts a notifier on a database of its own and drops its
// connection from the server side on demand.
type dropper struct {
	t        *testing.T
	admin    *pgx.Conn
	app      string
	connects chan struct{}
	waits    chan time.Duration
}

func startDropper(t *testing.T, stableAfter time.Duration) *dropper {
	connString := pgtest.DB().NewDatabase(t)
	admin, err := pgx.Connect(t.Context(), connString)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	cc, err := pgx.ParseConfig(connString)
	if err != nil {
		t.Fatal(err)
	}
	d := &dropper{t: t, admin: admin, app: "notifier_" + t.Name(), connects: make(chan struct{}, 16), waits: make(chan time.Duration, 16)}
	cc.RuntimeParams["application_name"] = d.app
	n, err := Start(t.Context(), Config{
		ConnConfig: cc, Channels: []string{"c"},
		OnConnect:   func() { d.connects <- struct{}{} },
		MaxBackoff:  time.Minute,
		StableAfter: stableAfter,
		waited:      func(w time.Duration) { d.waits <- w },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return d
}

// connected waits for the next successful LISTEN.
func (d *dropper) connected() {
	d.t.Helper()
	select {
	case <-d.connects:
	case <-time.After(30 * time.Second):
		d.t.Fatal("notifier did not connect")
	}
}

// drop terminates the notifier's backend and returns the wait the
// notifier chose before reconnecting.
func (d *dropper) drop() time.Duration {
	d.t.Helper()
	var n int
	if err := d.admin.QueryRow(d.t.Context(),
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", d.app).Scan(&n); err != nil {
		d.t.Fatal(err)
	}
	if n != 1 {
		d.t.Fatalf("terminated %d backends, want 1", n)
	}
	select {
	case w := <-d.waits:
		return w
	case <-time.After(30 * time.Second):
		d.t.Fatal("notifier did not notice the drop")
		return 0
	}
}

// After a connection that stayed up StableAfter, each reconnection starts
// from the shortest wait again: it used to double on every drop for the
// life of the process, so after a few drops every reconnect waited the
// maximum.
func TestBackoffResetAfterStableConnection(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "the reconnect backoff reset after a stable connection")
	const stable = 100 * time.Millisecond
	d := startDropper(t, stable)
	for i := range 4 {
		d.connected()
		// The connection must have been up StableAfter: a wait for a
		// condition of the clock, not a race.
		time.Sleep(stable + 20*time.Millisecond)
		if w := d.drop(); w != minBackoff {
			t.Fatalf("drop %d after a stable connection: waited %s, want %s", i+1, w, minBackoff)
		}
	}
	d.connected()
}

// A server that drops each connection at once still gets growing waits.
func TestBackoffGrowsWhileConnectionsDropAtOnce(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "the reconnect backoff growing while connections drop at once")
	d := startDropper(t, time.Hour)
	want := minBackoff
	for i := range 4 {
		d.connected()
		if w := d.drop(); w != want {
			t.Fatalf("drop %d: waited %s, want %s", i+1, w, want)
		}
		want *= 2
	}
	d.connected()
}
