package pglock_test

import (
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/pglock"
)

// relay is a TCP relay to a PostgreSQL server whose replies can be held
// back: a server that hangs, as seen by the connections through it. Bytes
// only, so it passes TLS through; integration/proxy reads the protocol
// (to drop commit replies) and so refuses TLS, which a DATABASE_URL with
// sslmode=require would need.
type relay struct {
	ln   net.Listener
	hold sync.Mutex // held by Pause: the copies of the server's replies wait for it
	mu   sync.Mutex
	open []net.Conn
}

// newRelay relays to the host and port of cfg, until the test ends, and
// returns cfg pointed at it (its fallbacks too).
func newRelay(t *testing.T, cfg *pgx.ConnConfig) (*relay, *pgx.ConnConfig) {
	t.Helper()
	target := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	r := &relay{ln: ln}
	go r.accept(target)
	t.Cleanup(r.close)
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	out := cfg.Copy()
	out.Host, out.Port = "127.0.0.1", port
	out.Fallbacks = nil
	for _, fb := range cfg.Fallbacks {
		c := *fb
		c.Host, c.Port = "127.0.0.1", port
		out.Fallbacks = append(out.Fallbacks, &pgconn.FallbackConfig{Host: c.Host, Port: c.Port, TLSConfig: c.TLSConfig})
	}
	return r, out
}

// relayedLocker returns a pool of a new database and a Locker on it
// (with cfg, which may be nil) whose sessions of their own go through a
// relay, and the relay.
func relayedLocker(t *testing.T, cfg *pglock.Config) (*pgxpool.Pool, *relay, *pglock.Locker) {
	t.Helper()
	pool := newPool(t)
	r, conn := newRelay(t, pool.Config().ConnConfig)
	c := pglock.Config{}
	if cfg != nil {
		c = *cfg
	}
	c.DirectConnConfig = conn
	return pool, r, newLocker(t, pool, &c)
}

func (r *relay) accept(target string) {
	for {
		client, err := r.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", target)
		if err != nil {
			client.Close()
			continue
		}
		r.mu.Lock()
		r.open = append(r.open, client, server)
		r.mu.Unlock()
		go func() {
			_, _ = io.Copy(server, client)
			server.Close()
		}()
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 {
					r.hold.Lock()
					_, werr := client.Write(buf[:n])
					r.hold.Unlock()
					if werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			client.Close()
		}()
	}
}

// Pause holds back every reply of the server until Resume.
func (r *relay) Pause() { r.hold.Lock() }

// Resume lets the replies through again.
func (r *relay) Resume() { r.hold.Unlock() }

func (r *relay) close() {
	r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.open {
		c.Close()
	}
}
