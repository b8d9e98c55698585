package proctest

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a server until frozen; frozen, it
// holds every byte either way without closing anything, like a server
// (or a network) that has gone silent. It stops when the test ends.
type Proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
	// After a connection sent first, the proxy freezes when it sends
	// then; triggered is closed at that moment.
	first, then []byte
	triggered   chan struct{}
}

// NewProxy listens on a free loopback port and forwards to target.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("proctest: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: target}
	p.cond = sync.NewCond(&p.mu)
	tb.Cleanup(func() { ln.Close(); p.Freeze(false) })
	go p.accept()
	return p
}

// Addr is where clients connect instead of the server.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Freeze holds (true) or lets through again (false) every byte.
func (p *Proxy) Freeze(frozen bool) {
	p.mu.Lock()
	p.frozen = frozen
	p.mu.Unlock()
	p.cond.Broadcast()
}

// FreezeAfter freezes the proxy the moment a connection that has sent
// first sends then (first picks the connection: a statement only the
// request under test runs). That chunk still reaches the server; its
// answer does not. The channel is closed when it happens. MySQL's COMMIT
// is "\x03COMMIT" (COM_QUERY).
func (p *Proxy) FreezeAfter(first, then []byte) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.first, p.then = first, then
	p.triggered = make(chan struct{})
	return p.triggered
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				return
			}
			defer up.Close()
			go p.pipe(up, c, true)
			p.pipe(c, up, false)
		}()
	}
}

// pipe copies src to dst, holding each chunk while the proxy is frozen.
func (p *Proxy) pipe(dst, src net.Conn, fromClient bool) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	armed := false // this connection sent p.first
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.frozen {
				p.cond.Wait()
			}
			if fromClient && p.first != nil {
				armed = armed || bytes.Contains(buf[:n], p.first)
				if armed && bytes.Contains(buf[:n], p.then) {
					// Frozen before the chunk leaves, so its answer is held.
					p.frozen, p.first, p.then = true, nil, nil
					close(p.triggered)
				}
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
