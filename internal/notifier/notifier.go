// Package notifier keeps one LISTEN connection open and hands each
// notification to a callback. It reconnects after the connection dies, and
// reports every (re)connection, since notifications sent while it was away
// are lost and the caller should look for work it may have missed.
package notifier

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Config configures a Notifier.
type Config struct {
	// ConnConfig is how to dial the dedicated connection. Required.
	ConnConfig *pgx.ConnConfig
	// Channels are the channels to LISTEN on, unquoted: the notifier
	// quotes them. At least one is required.
	Channels []string
	// OnNotify receives each notification's channel and payload. It runs on
	// the notifier's goroutine: keep it short.
	OnNotify func(channel, payload string)
	// OnConnect runs after each successful LISTEN, the first included.
	OnConnect func()
	// OnError receives connection errors; optional.
	OnError func(err error)
	// MaxBackoff caps the wait between reconnection attempts. Default 5s.
	MaxBackoff time.Duration
	// PingInterval is how long the connection may be silent before it is
	// pinged, so a connection that died without a word is noticed.
	// Default 30s.
	PingInterval time.Duration
	// StableAfter is how long a connection must have stayed up for the
	// next reconnection to start again from the shortest wait: a server
	// that accepts and drops at once still gets the growing waits.
	// Default 1s.
	StableAfter time.Duration

	// waited, a test hook, is told each wait before a reconnection.
	waited func(time.Duration)
}

// minBackoff is the first wait before reconnecting.
const minBackoff = 50 * time.Millisecond

// Notifier is a running LISTEN loop.
type Notifier struct {
	cfg    Config
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	connected bool
}

// Start begins listening; Stop ends it. ctx bounds the notifier's life.
func Start(ctx context.Context, cfg Config) (*Notifier, error) {
	if cfg.ConnConfig == nil || len(cfg.Channels) == 0 {
		return nil, ErrNoConfig
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Second
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 30 * time.Second
	}
	if cfg.StableAfter <= 0 {
		cfg.StableAfter = time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	n := &Notifier{cfg: cfg, cancel: cancel, done: make(chan struct{})}
	go n.run(ctx)
	return n, nil
}

// Stop ends the loop and waits for it, closing the connection.
func (n *Notifier) Stop() {
	n.cancel()
	<-n.done
}

// Connected reports whether the LISTEN connection is up.
func (n *Notifier) Connected() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.connected
}

func (n *Notifier) setConnected(v bool) {
	n.mu.Lock()
	n.connected = v
	n.mu.Unlock()
}

func (n *Notifier) run(ctx context.Context) {
	defer close(n.done)
	backoff := minBackoff
	for ctx.Err() == nil {
		var up time.Time
		err := n.listen(ctx, &up)
		n.setConnected(false)
		if ctx.Err() != nil {
			return
		}
		if err != nil && n.cfg.OnError != nil {
			n.cfg.OnError(err)
		}
		if !up.IsZero() && time.Since(up) >= n.cfg.StableAfter {
			// A connection that served a while says nothing about the
			// next one: do not make it wait for the drops of long ago.
			backoff = minBackoff
		}
		if n.cfg.waited != nil {
			n.cfg.waited(backoff)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, n.cfg.MaxBackoff)
	}
}

// listen holds one connection until it fails or ctx ends. It sets up to
// when the connection started listening.
func (n *Notifier) listen(ctx context.Context, up *time.Time) error {
	conn, err := pgx.ConnectConfig(ctx, n.cfg.ConnConfig)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	for _, ch := range n.cfg.Channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	n.setConnected(true)
	*up = time.Now()
	if n.cfg.OnConnect != nil {
		n.cfg.OnConnect()
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, n.cfg.PingInterval)
		note, err := conn.WaitForNotification(wctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed() {
			// Silent for a while: make sure the connection still answers.
			pctx, cancel := context.WithTimeout(ctx, n.cfg.PingInterval)
			err = conn.Ping(pctx)
			cancel()
			if err == nil {
				continue
			}
		}
		if err != nil {
			return err
		}
		if n.cfg.OnNotify != nil {
			n.cfg.OnNotify(note.Channel, note.Payload)
		}
	}
}

// ErrNoConfig is returned when Config lacks a required field.
var ErrNoConfig = errors.New("notifier: ConnConfig and Channels are required")
