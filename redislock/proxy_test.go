package redislock_test

import (
	"net"
	"sync"
	"testing"
)

// pausableProxy forwards TCP connections to a server. Paused, it holds the
// bytes it reads in both directions until resumed, as a network link that
// hangs (a stalled switch, a partition that drops packets) rather than one
// that resets: the client's connection stays open and its reads block.
type pausableProxy struct {
	addr   string
	target string
	ln     net.Listener

	mu      sync.Mutex
	resumed chan struct{} // closed while forwarding; open while paused
	conns   []net.Conn
	closed  bool
	wg      sync.WaitGroup
}

// startProxy listens on a free port of 127.0.0.1 and forwards to target,
// until the test ends.
func startProxy(t *testing.T, target string) *pausableProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pausableProxy{addr: ln.Addr().String(), target: target, ln: ln, resumed: make(chan struct{})}
	close(p.resumed)
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *pausableProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(s, c) })
		p.wg.Go(func() { p.pipe(c, s) })
	}
}

// pipe copies src to dst, holding what it read while the proxy is paused.
func (p *pausableProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			resumed := p.resumed
			p.mu.Unlock()
			<-resumed
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or closed: dst.Close passes it on
		}
	}
}

// pause holds every byte from now on until resume.
func (p *pausableProxy) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resumed:
		p.resumed = make(chan struct{})
	default: // paused already
	}
}

// resume forwards what was held and what follows.
func (p *pausableProxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resumed:
	default:
		close(p.resumed)
	}
}

// close resumes, closes the listener and every connection, and waits for
// the proxy's goroutines.
func (p *pausableProxy) close() {
	p.resume()
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
