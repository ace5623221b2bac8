package pgqueue_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

// A session lock behind a pooler that hands each transaction to another
// backend (pgbouncer in transaction or statement mode) would be released
// by, or leak into, whichever backend runs the next statement: taking one
// must fail with ErrNoSessionAffinity, and lease locks must still work.
func TestSessionLockBehindRotatingPooler(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	direct, err := pgx.ParseConfig(pgtest.DB().NewDatabase(t))
	must(t, err)
	pooler := startRotatingPooler(t, fmt.Sprintf("%s:%d", direct.Host, direct.Port), 0)
	c := newClient(t, poolThrough(t, direct, pooler), nil)

	for _, try := range []bool{false, true} {
		var err error
		if try {
			_, err = c.TrySessionLock(ctx, "report", nil)
		} else {
			_, err = c.SessionLock(ctx, "report", nil)
		}
		if !errors.Is(err, pgqueue.ErrNoSessionAffinity) {
			t.Fatalf("session lock (try %v) through a rotating pooler: err = %v, want ErrNoSessionAffinity", try, err)
		}
	}
	if pooler.backends() < 2 {
		t.Fatalf("the pooler used %d backends; the test proves nothing", pooler.backends())
	}

	lease, err := c.AcquireLease(ctx, "report", "me", pgqueue.DefaultLeaderTTL)
	if err != nil {
		t.Fatalf("lease lock through the pooler: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("release lease through the pooler: %v", err)
	}
}

// A pooler may keep one backend for a while, so that the probe passes, and
// move the session later: the keepalive sees another backend answer and
// declares the lock lost.
func TestSessionLockLostWhenPoolerMovesSession(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	direct, err := pgx.ParseConfig(pgtest.DB().NewDatabase(t))
	must(t, err)
	// The probe's three statements and the lock itself: four requests on
	// the first backend; the keepalive's goes to the second.
	pooler := startRotatingPooler(t, fmt.Sprintf("%s:%d", direct.Host, direct.Port), 4)
	c := newClient(t, poolThrough(t, direct, pooler), nil)

	lock, err := c.SessionLock(ctx, "report", &pgqueue.SessionLockOpts{KeepaliveInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("session lock while the pooler keeps one backend: %v", err)
	}
	select {
	case <-lock.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("lock not declared lost after the pooler moved the session")
	}
	cause := context.Cause(lock.Context())
	if !errors.Is(cause, pgqueue.ErrLockLost) || !errors.Is(cause, pgqueue.ErrNoSessionAffinity) {
		t.Fatalf("cause %v, want ErrLockLost and ErrNoSessionAffinity", cause)
	}
	_ = lock.Unlock(ctx)
}

// poolThrough returns a pool on direct's database that connects through
// the pooler, configured as PgBouncer users configure pgx: no named
// statements, which would live in one backend only.
func poolThrough(t *testing.T, direct *pgx.ConnConfig, pooler *rotatingPooler) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(direct.ConnString())
	must(t, err)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = pooler.host, pooler.port
	cfg.ConnConfig.TLSConfig, cfg.ConnConfig.Fallbacks = nil, nil
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	must(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// rotatingPooler stands in for pgbouncer in statement mode: each client
// connection gets two server connections, and after the first sticky
// requests on the first one, every request (a simple query, or
// extended-protocol messages up to Sync) goes to the other one than the
// request before. It speaks just enough of the protocol for trust
// authentication.
type rotatingPooler struct {
	host   string
	port   uint16
	sticky int

	mu   sync.Mutex
	pids map[uint32]bool // backend process ids seen in BackendKeyData
}

func (p *rotatingPooler) backends() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pids)
}

func startRotatingPooler(t *testing.T, upstream string, sticky int) *rotatingPooler {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().(*net.TCPAddr)
	p := &rotatingPooler{host: "127.0.0.1", port: uint16(addr.Port), sticky: sticky, pids: map[uint32]bool{}}
	var wg sync.WaitGroup
	var open sync.Map // net.Conn → struct{}
	t.Cleanup(func() {
		ln.Close()
		open.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				var conns []net.Conn
				defer func() {
					for _, c := range conns {
						open.Delete(c)
						c.Close()
					}
				}()
				conns = append(conns, client)
				open.Store(client, struct{}{})
				for range 2 {
					s, err := net.Dial("tcp", upstream)
					if err != nil {
						return
					}
					conns = append(conns, s)
					open.Store(s, struct{}{})
				}
				_ = p.serve(client, conns[1:])
			}()
		}
	}()
	return p
}

// Protocol codes of the startup phase.
const (
	sslRequestCode = 80877103
	gssRequestCode = 80877104
)

func (p *rotatingPooler) serve(client net.Conn, servers []net.Conn) error {
	cr := bufio.NewReader(client)
	startup, err := readStartup(cr, client)
	if err != nil {
		return err
	}
	readers := make([]*bufio.Reader, len(servers))
	for i, s := range servers {
		readers[i] = bufio.NewReader(s)
		if _, err := s.Write(startup); err != nil {
			return err
		}
		// The first server's greeting goes to the client; the others' are
		// read and dropped.
		var to io.Writer = io.Discard
		if i == 0 {
			to = client
		}
		if err := p.relayUntilReady(readers[i], to); err != nil {
			return err
		}
	}
	next := 0
	for request := 1; ; request++ {
		// Forward one request: a simple query, or messages up to Sync.
		for {
			msg, err := readMessage(cr)
			if err != nil {
				return err
			}
			if msg[0] == 'X' {
				return nil
			}
			if _, err := servers[next].Write(msg); err != nil {
				return err
			}
			if msg[0] == 'Q' || msg[0] == 'S' {
				break
			}
		}
		if err := p.relayUntilReady(readers[next], client); err != nil {
			return err
		}
		if request >= p.sticky {
			next = (next + 1) % len(servers)
		}
	}
}

// relayUntilReady copies a server's messages to w up to and including
// ReadyForQuery, noting the backend's pid when it tells it.
func (p *rotatingPooler) relayUntilReady(r *bufio.Reader, w io.Writer) error {
	for {
		msg, err := readMessage(r)
		if err != nil {
			return err
		}
		if msg[0] == 'K' && len(msg) >= 9 {
			p.mu.Lock()
			p.pids[binary.BigEndian.Uint32(msg[5:9])] = true
			p.mu.Unlock()
		}
		if _, err := w.Write(msg); err != nil {
			return err
		}
		if msg[0] == 'Z' {
			return nil
		}
	}
}

// readStartup reads the client's startup message, refusing encryption
// requests so that the client goes on in the clear.
func readStartup(r *bufio.Reader, client net.Conn) ([]byte, error) {
	for {
		var head [8]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return nil, err
		}
		n := binary.BigEndian.Uint32(head[:4])
		if n < 8 || n > 1<<16 {
			return nil, fmt.Errorf("startup message of %d bytes", n)
		}
		msg := make([]byte, n)
		copy(msg, head[:])
		if _, err := io.ReadFull(r, msg[8:]); err != nil {
			return nil, err
		}
		switch binary.BigEndian.Uint32(head[4:8]) {
		case sslRequestCode, gssRequestCode:
			if _, err := client.Write([]byte{'N'}); err != nil {
				return nil, err
			}
		default:
			return msg, nil
		}
	}
}

// readMessage reads one typed protocol message: type, length, body.
func readMessage(r *bufio.Reader) ([]byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[1:5])
	if n < 4 || n > 1<<30 {
		return nil, fmt.Errorf("message %q of %d bytes", head[0], n)
	}
	msg := make([]byte, 1+n)
	copy(msg, head[:])
	if _, err := io.ReadFull(r, msg[5:]); err != nil {
		return nil, err
	}
	return msg, nil
}
