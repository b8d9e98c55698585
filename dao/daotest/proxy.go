package daotest

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// SilentProxy forwards TCP to a database until it goes silent; then it
// holds every byte both ways, like a database host that stops answering
// without closing or refusing anything.
type SilentProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	silent bool
	// After a connection sent first, then silences the proxy when it
	// sends then; triggered is closed at that moment.
	first, then []byte
	triggered   chan struct{}
}

// NewSilentProxy listens on a free local port and forwards to target
// (host:port) until the test ends.
func NewSilentProxy(tb testing.TB, target string) *SilentProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &SilentProxy{ln: ln, target: target}
	p.cond = sync.NewCond(&p.mu)
	tb.Cleanup(func() { ln.Close(); p.Resume() })
	go p.accept()
	return p
}

// Addr is where clients connect.
func (p *SilentProxy) Addr() string { return p.ln.Addr().String() }

// Silence holds every byte from now on.
func (p *SilentProxy) Silence() { p.set(true) }

// Resume forwards again, the bytes held first.
func (p *SilentProxy) Resume() { p.set(false) }

func (p *SilentProxy) set(silent bool) {
	p.mu.Lock()
	p.silent = silent
	p.mu.Unlock()
	p.cond.Broadcast()
}

// SilenceAfter goes silent the moment a connection that has sent first
// sends then (first picks the connection: a statement only the request
// under test runs). That chunk still reaches the database; its answer
// does not. The channel is closed when it happens. MySQL's COMMIT is
// "\x03COMMIT" (COM_QUERY).
func (p *SilentProxy) SilenceAfter(first, then []byte) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.first, p.then = first, then
	p.triggered = make(chan struct{})
	return p.triggered
}

func (p *SilentProxy) accept() {
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
			go p.pipe(c, up, false)
			p.pipe(up, c, true)
		}()
	}
}

// pipe copies src to dst, holding each chunk while the proxy is silent.
func (p *SilentProxy) pipe(dst, src net.Conn, fromClient bool) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	armed := false // this connection sent p.first
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.silent {
				p.cond.Wait()
			}
			if fromClient && p.first != nil {
				armed = armed || bytes.Contains(buf[:n], p.first)
				if armed && bytes.Contains(buf[:n], p.then) {
					// Silent before the chunk leaves, so its answer is held.
					p.silent, p.first, p.then = true, nil, nil
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
