package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/pglock"
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
	lk := newLocker(t, poolThrough(t, direct, pooler), nil)

	for _, try := range []bool{false, true} {
		var err error
		if try {
			_, err = lk.TryLockSession(ctx, "report", nil)
		} else {
			_, err = lk.LockSession(ctx, "report", nil)
		}
		if !errors.Is(err, pglock.ErrNoSessionAffinity) {
			t.Fatalf("session lock (try %v) through a rotating pooler: err = %v, want ErrNoSessionAffinity", try, err)
		}
	}
	if pooler.backends() < 2 {
		t.Fatalf("the pooler used %d backends; the test proves nothing", pooler.backends())
	}

	lease, err := lk.TryLockLease(ctx, "report", "me", 10*time.Second)
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
	lk := newLocker(t, poolThrough(t, direct, pooler), nil)

	// Each keepalive gets its interval to answer: at 50 ms a loaded machine
	// (-race, load 20) let one time out, losing the lock to a slow
	// answer rather than to the moved session.
	lock, err := lk.LockSession(ctx, "report", &pglock.SessionLockOpts{KeepaliveInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatalf("session lock while the pooler keeps one backend: %v", err)
	}
	select {
	case <-lock.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("lock not declared lost after the pooler moved the session")
	}
	cause := context.Cause(lock.Context())
	if !errors.Is(cause, pglock.ErrLost) || !errors.Is(cause, pglock.ErrNoSessionAffinity) {
		t.Fatalf("cause %v, want ErrLost and ErrNoSessionAffinity", cause)
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
// request before. Messages are read and written with pgx's pgproto3; the
// pooler handles just enough of the protocol for trust authentication.
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
	// dial opens a connection to the server that the cleanup closes.
	dial := func() (net.Conn, error) {
		c, err := net.Dial("tcp", upstream)
		if err == nil {
			open.Store(c, struct{}{})
		}
		return c, err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			open.Store(client, struct{}{})
			wg.Go(func() {
				conns := []net.Conn{client}
				defer func() {
					for _, c := range conns {
						open.Delete(c)
						c.Close()
					}
				}()
				_ = p.serve(client, dial, &conns)
			})
		}
	}()
	return p
}

// serve runs one client connection: the startup, then requests until the
// client terminates. Every server connection it dials goes into *conns.
func (p *rotatingPooler) serve(client net.Conn, dial func() (net.Conn, error), conns *[]net.Conn) error {
	front := pgproto3.NewBackend(client, client) // we are the client's server
	var startup *pgproto3.StartupMessage
	for startup == nil {
		msg, err := front.ReceiveStartupMessage()
		if err != nil {
			return err
		}
		switch msg := msg.(type) {
		case *pgproto3.SSLRequest, *pgproto3.GSSEncRequest:
			// Refuse encryption: the client goes on in the clear.
			if _, err := client.Write([]byte{'N'}); err != nil {
				return err
			}
		case *pgproto3.CancelRequest:
			// The client knows the first server's key (see below): pass
			// the request on to the server, which answers nothing.
			s, err := dial()
			if err != nil {
				return err
			}
			*conns = append(*conns, s)
			fe := pgproto3.NewFrontend(s, s)
			fe.Send(msg)
			return fe.Flush()
		case *pgproto3.StartupMessage:
			startup = msg
		default:
			return fmt.Errorf("unexpected startup message %T", msg)
		}
	}

	servers := make([]*pgproto3.Frontend, 2)
	for i := range servers {
		s, err := dial()
		if err != nil {
			return err
		}
		*conns = append(*conns, s)
		servers[i] = pgproto3.NewFrontend(s, s)
		servers[i].Send(startup)
		if err := servers[i].Flush(); err != nil {
			return err
		}
		// The first server's greeting goes to the client; the others' are
		// read and dropped.
		to := front
		if i > 0 {
			to = nil
		}
		if err := p.relayUntilReady(servers[i], to); err != nil {
			return err
		}
	}

	next := 0
	for request := 1; ; request++ {
		// Forward one request: a simple query, or messages up to Sync.
		for done := false; !done; {
			msg, err := front.Receive()
			if err != nil {
				return err
			}
			switch msg.(type) {
			case *pgproto3.Terminate:
				return nil
			case *pgproto3.Query, *pgproto3.Sync:
				done = true
			}
			servers[next].Send(msg)
		}
		if err := servers[next].Flush(); err != nil {
			return err
		}
		if err := p.relayUntilReady(servers[next], front); err != nil {
			return err
		}
		if request >= p.sticky {
			next = (next + 1) % len(servers)
		}
	}
}

// relayUntilReady passes a server's messages on to the client (to; nil
// drops them) up to and including ReadyForQuery, noting the backend's pid
// when it tells it.
func (p *rotatingPooler) relayUntilReady(server *pgproto3.Frontend, to *pgproto3.Backend) error {
	for {
		msg, err := server.Receive()
		if err != nil {
			return err
		}
		if k, ok := msg.(*pgproto3.BackendKeyData); ok {
			p.mu.Lock()
			p.pids[k.ProcessID] = true
			p.mu.Unlock()
		}
		if to != nil {
			to.Send(msg)
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			if to != nil {
				return to.Flush()
			}
			return nil
		}
	}
}
