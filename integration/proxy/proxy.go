// Package proxy is a TCP proxy for fault tests that sits between PostgreSQL
// clients and a server and injects network faults on demand: connections cut
// at random, and commits whose reply never reaches the client.
//
// A test points its workers at Addr instead of the server, switches faults on
// and off while they run (CutRandom, DropCommitReply, CutAll), and reads what
// was injected from Stats.
package proxy

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

const (
	// chaosTick is how often random cuts are drawn.
	chaosTick = 10 * time.Millisecond
	// commitCloseDelay is how long a connection whose commit reply is being
	// dropped stays open after the first reply bytes arrived: long enough
	// for the server to finish the reply, too short for anything else.
	commitCloseDelay = 20 * time.Millisecond
	// commitCloseTimeout closes such a connection even if the server never
	// answered the commit.
	commitCloseTimeout = 2 * time.Second
	// maxMessage bounds a client message, its length field included, that
	// the proxy accepts; anything larger is a broken stream.
	maxMessage = 1 << 30
	// batchSize is the size from which a batch of client messages is
	// written without waiting for more.
	batchSize = 64 << 10
)

// Stats counts what a proxy did.
type Stats struct {
	// Accepted is the number of client connections accepted.
	Accepted int64
	// Cuts is the number of connections cut by CutRandom or CutAll.
	Cuts int64
	// CommitsSeen is the number of simple-query COMMIT messages forwarded.
	CommitsSeen int64
	// CommitRepliesDropped is the number of commits whose reply was
	// withheld from the client, its connection then closed.
	CommitRepliesDropped int64
}

// Faults returns the number of faults injected: cuts plus dropped commit
// replies.
func (s Stats) Faults() int64 { return s.Cuts + s.CommitRepliesDropped }

// Proxy forwards TCP connections from a listener on 127.0.0.1 to a target
// address, injecting the faults currently switched on. Its methods are safe
// for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener

	// Fault settings, as math.Float64bits: read on every message.
	cutPerSecond atomic.Uint64
	dropCommit   atomic.Uint64

	accepted, cuts, commits, dropped atomic.Int64

	mu     sync.Mutex
	links  map[*link]struct{}
	closed bool

	done chan struct{} // closed by Close
	wg   sync.WaitGroup
}

// New starts a proxy on a free port of 127.0.0.1 forwarding to target
// (host:port). No fault is on until one is switched on. The caller must
// Close it.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: listen: %w", err)
	}
	p := &Proxy{
		target: target,
		ln:     ln,
		links:  map[*link]struct{}{},
		done:   make(chan struct{}),
	}
	p.wg.Add(2)
	go p.acceptLoop()
	go p.chaosLoop()
	return p, nil
}

// Addr returns the address clients connect to, as host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port returns the port clients connect to on 127.0.0.1.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// ConnString returns connString (a postgres:// URL) with its host and port
// replaced by the proxy's.
func (p *Proxy) ConnString(connString string) (string, error) {
	return replaceHost(connString, "127.0.0.1", strconv.Itoa(p.Port()))
}

// CutRandom makes every open connection be cut (both sides closed) with
// probability perSecond within any one second, independently of the others
// and of its traffic. 0 switches random cuts off; 1 or more cuts every
// connection at once and every new one right after it opens.
func (p *Proxy) CutRandom(perSecond float64) {
	p.cutPerSecond.Store(math.Float64bits(clamp01(perSecond)))
}

// DropCommitReply makes each simple-query COMMIT (COMMIT or END, any case,
// an optional ';') pass to the server with probability prob of then losing
// its reply: everything the server sends afterwards on that connection is
// dropped and both sides are closed shortly after the reply arrived. The
// commit most likely took effect, but the client never learns it. 0
// switches the fault off.
func (p *Proxy) DropCommitReply(prob float64) {
	p.dropCommit.Store(math.Float64bits(clamp01(prob)))
}

// CutAll cuts every open connection now and returns how many it cut.
func (p *Proxy) CutAll() int {
	n := 0
	for _, l := range p.snapshot() {
		if l.close(&p.cuts) {
			n++
		}
	}
	return n
}

// Stats returns the counters so far.
func (p *Proxy) Stats() Stats {
	return Stats{
		Accepted:             p.accepted.Load(),
		Cuts:                 p.cuts.Load(),
		CommitsSeen:          p.commits.Load(),
		CommitRepliesDropped: p.dropped.Load(),
	}
}

// Close stops accepting, closes every connection and waits for the proxy's
// goroutines to end. Closing twice does nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	links := p.links
	p.links = map[*link]struct{}{}
	p.mu.Unlock()

	err := p.ln.Close()
	for l := range links {
		l.close(nil)
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient accept failure (EMFILE and the like): back off a
			// little rather than spin.
			select {
			case <-p.done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.serve(client)
	}
}

// serve dials the target for client and runs both directions until either
// side ends.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	l := &link{client: client, server: server}
	if !p.register(l) {
		l.close(nil)
		return
	}
	defer p.unregister(l)

	var both sync.WaitGroup
	both.Add(2)
	go func() {
		defer both.Done()
		p.clientToServer(l)
		l.close(nil)
	}()
	go func() {
		defer both.Done()
		p.serverToClient(l)
		l.close(nil)
	}()
	both.Wait()
	l.stopTimer()
}

func (p *Proxy) register(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.links[l] = struct{}{}
	return true
}

func (p *Proxy) unregister(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.links, l)
}

func (p *Proxy) snapshot() []*link {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*link, 0, len(p.links))
	for l := range p.links {
		out = append(out, l)
	}
	return out
}

// chaosLoop draws random cuts every chaosTick.
func (p *Proxy) chaosLoop() {
	defer p.wg.Done()
	t := time.NewTicker(chaosTick)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		perSecond := math.Float64frombits(p.cutPerSecond.Load())
		if perSecond <= 0 {
			continue
		}
		// The chance per tick that makes the chance per second perSecond.
		perTick := 1 - math.Pow(1-perSecond, chaosTick.Seconds())
		for _, l := range p.snapshot() {
			if rand.Float64() < perTick {
				l.close(&p.cuts)
			}
		}
	}
}

// clientToServer forwards the client's messages, read with pgproto3, so
// that it can tell a COMMIT from anything else. Messages that arrived
// together are written together.
func (p *Proxy) clientToServer(l *link) {
	c := newClientReader(l.client, l.server)
	cancel, err := c.startup(func() error {
		// Tests connect without encryption: refuse it ourselves, and the
		// client goes on in the clear with a new startup message.
		_, err := l.client.Write([]byte{'N'})
		return err
	})
	if err != nil {
		return
	}
	if cancel {
		// The server answers a cancel request by closing; until it does,
		// whatever else the client sends goes on to it.
		_, _ = io.Copy(l.server, l.client)
		return
	}
	for {
		msg, err := c.next()
		if err != nil {
			return
		}
		if q, ok := msg.(*pgproto3.Query); ok && isCommit(q.String) {
			p.commits.Add(1)
			if rand.Float64() < math.Float64frombits(p.dropCommit.Load()) {
				// Swallow the reply from now on, before the server can
				// possibly send it; the reader closes the link once it
				// came.
				l.dropping.Store(true)
				l.startTimer(commitCloseTimeout, func() { p.closeDropped(l) })
			}
		}
		if err := c.send(msg); err != nil {
			return
		}
	}
}

// serverToClient copies the server's bytes to the client, except after a
// commit whose reply is to be dropped.
func (p *Proxy) serverToClient(l *link) {
	buf := make([]byte, 32<<10)
	for {
		n, err := l.server.Read(buf)
		if n > 0 {
			if l.dropping.Load() {
				// The reply to the commit is here: the commit happened.
				// Close once the rest of it has come, unread.
				l.startTimer(commitCloseDelay, func() { p.closeDropped(l) })
			} else if _, werr := l.client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) closeDropped(l *link) {
	l.close(&p.dropped)
}

// link is one proxied connection.
type link struct {
	client, server net.Conn
	// dropping is set once a commit whose reply is to be lost went by.
	dropping atomic.Bool

	mu     sync.Mutex
	closed bool
	timer  *time.Timer
}

// close closes both sides and reports whether this call did it. When it
// did, it first adds one to count, if given: a client that sees its
// connection die then already finds the fault counted.
func (l *link) close(count *atomic.Int64) bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	l.closed = true
	l.mu.Unlock()
	if count != nil {
		count.Add(1)
	}
	_ = l.client.Close()
	_ = l.server.Close()
	return true
}

// startTimer runs f after d, replacing the timer set before, unless the
// link is closed.
func (l *link) startTimer(d time.Duration, f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	l.timer = time.AfterFunc(d, f)
}

func (l *link) stopTimer() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
	}
}

// clientReader reads a client's messages with pgproto3 and passes them on
// to the server, encoded again: for the messages of a well-formed stream
// the encoding gives back the bytes the client sent, except that a startup
// message's parameters may come in another order.
//
// Messages wait in a batch until the reader has to read from the client
// again, or the batch is full: messages that arrived together are written
// together.
type clientReader struct {
	client io.Reader
	server io.Writer
	be     *pgproto3.Backend
	batch  []byte // encoded messages not yet written to server
}

func newClientReader(client io.Reader, server io.Writer) *clientReader {
	c := &clientReader{client: client, server: server, batch: make([]byte, 0, batchSize)}
	// The proxy answers the client through no Backend: it only reads.
	c.be = pgproto3.NewBackend(c, nil)
	c.be.SetMaxBodyLen(maxMessage - 4)
	// A 'p' message is a password, a SASL or a GSSAPI response, told apart
	// only by the authentication the server asked for, which the proxy does
	// not follow: as a GSSResponse, any of them is carried as opaque bytes.
	_ = c.be.SetAuthType(pgproto3.AuthTypeGSS)
	return c
}

// Read implements io.Reader for the Backend. It writes the batch first:
// the Backend reads only once it has used up the bytes received so far,
// and this read may wait.
func (c *clientReader) Read(p []byte) (int, error) {
	if err := c.flush(); err != nil {
		return 0, err
	}
	return c.client.Read(p)
}

// startup passes on the startup phase: it calls refuse for each request
// for encryption (SSLRequest, GSSEncRequest), then forwards the startup
// message or a cancel request. cancel reports a cancel request, after
// which a client sends no more messages.
func (c *clientReader) startup(refuse func() error) (cancel bool, err error) {
	for {
		msg, err := c.be.ReceiveStartupMessage()
		if err != nil {
			return false, err
		}
		switch msg.(type) {
		case *pgproto3.SSLRequest, *pgproto3.GSSEncRequest:
			if err := refuse(); err != nil {
				return false, err
			}
			continue
		case *pgproto3.CancelRequest:
			cancel = true
		}
		if err := c.send(msg); err != nil {
			return false, err
		}
		return cancel, c.flush()
	}
}

// next reads the client's next message after the startup phase. It is
// valid until the next call.
func (c *clientReader) next() (pgproto3.FrontendMessage, error) {
	return c.be.Receive()
}

// send adds msg to the batch, and writes the batch once it is full.
func (c *clientReader) send(msg pgproto3.FrontendMessage) error {
	batch, err := msg.Encode(c.batch)
	if err != nil {
		return fmt.Errorf("proxy: encode %T: %w", msg, err)
	}
	c.batch = batch
	if len(c.batch) >= batchSize {
		return c.flush()
	}
	return nil
}

// flush writes the batch to the server.
func (c *clientReader) flush() error {
	if len(c.batch) == 0 {
		return nil
	}
	_, err := c.server.Write(c.batch)
	c.batch = c.batch[:0]
	return err
}

// isCommit reports whether the text of a Query message is a COMMIT (or its
// synonym END) and nothing else.
func isCommit(query string) bool {
	query = strings.TrimSpace(query)
	query = strings.TrimSuffix(query, ";")
	query = strings.TrimSpace(query)
	for _, word := range []string{"commit", "end", "commit transaction", "commit work"} {
		if strings.EqualFold(query, word) {
			return true
		}
	}
	return false
}

func clamp01(v float64) float64 {
	if math.IsNaN(v) || v < 0 {
		return 0
	}
	return min(v, 1)
}

// replaceHost returns the URL connString with its host and port replaced.
func replaceHost(connString, host, port string) (string, error) {
	u, err := url.Parse(connString)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("proxy: not a postgres URL: %q", connString)
	}
	u.Host = net.JoinHostPort(host, port)
	return u.String(), nil
}
