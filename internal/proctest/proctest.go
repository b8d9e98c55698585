// Package proctest runs a private server process for one test: on a free
// loopback port, ready once it answers, stoppable and restartable to play
// an outage, and killed when the test ends. natstest and redistest build
// their private NATS and Redis servers on it.
package proctest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// startTimeout bounds how long a process may take to answer.
const startTimeout = 10 * time.Second

// Spec says how to run and recognise one kind of server.
type Spec struct {
	// Name is the server's name in messages ("nats-server").
	Name string
	// Binary is the executable.
	Binary string
	// Args are its arguments for a port.
	Args func(port int) []string
	// Ready reports whether the server at addr answers (within timeout).
	Ready func(addr string, timeout time.Duration) error
}

// Process is a private server process.
type Process struct {
	tb   testing.TB
	spec Spec
	port int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start runs the server on a free port and waits until it answers. Without
// the binary the test is skipped loudly (failed under CI).
func Start(tb testing.TB, spec Spec) *Process {
	tb.Helper()
	if _, err := os.Stat(spec.Binary); err != nil {
		Unavailable(tb, spec.Name, fmt.Sprintf("no %s (%v): install %s to run this test", spec.Binary, err, spec.Name))
	}
	p := &Process{tb: tb, spec: spec, port: FreePort(tb)}
	tb.Cleanup(p.Stop)
	p.Start()
	return p
}

// Addr is the server's host:port.
func (p *Process) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }

// Start starts the server (again) and waits until it answers. Starting a
// running server does nothing.
func (p *Process) Start() {
	p.tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return
	}
	out := &bytes.Buffer{}
	cmd := exec.Command(p.spec.Binary, p.spec.Args(p.port)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		p.tb.Fatalf("proctest: start %s: %v", p.spec.Binary, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.done = cmd, done

	deadline := time.Now().Add(startTimeout)
	for {
		err := p.spec.Ready(p.Addr(), 200*time.Millisecond)
		if err == nil {
			return
		}
		select {
		case <-done:
			p.cmd = nil
			p.tb.Fatalf("proctest: %s exited at start: %s", p.spec.Name, out)
		case <-time.After(20 * time.Millisecond): // poll interval
		}
		if time.Now().After(deadline) {
			p.tb.Fatalf("proctest: %s not answering on %s after %v (%v): %s", p.spec.Name, p.Addr(), startTimeout, err, out)
		}
	}
}

// Stop kills the server, as a crash would, and waits for it to exit.
// Stopping a stopped server does nothing.
func (p *Process) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	p.cmd = nil
}

// Unavailable fails the test under CI, where the server must be there, and
// skips it loudly elsewhere.
func Unavailable(tb testing.TB, server, why string) {
	tb.Helper()
	if inCI() {
		tb.Fatalf("%s: CI=%s is set, so the server must be there, but %s", server, os.Getenv("CI"), why)
	}
	tb.Skipf("SKIPPING %s test: %s", server, why)
}

// inCI reports whether the tests run in CI: CI set to anything at all
// (CI=true, CI=1, ...), as CI systems set it. There, every server a test
// needs must be there.
func inCI() bool { return os.Getenv("CI") != "" }

// Dial is a Ready for servers that are ready once they accept TCP.
func Dial(addr string, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	return conn.Close()
}

// FreePort asks the kernel for a port nobody listens on now: for a
// server's second port (a cluster port, say), which Spec.Args names.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("proctest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
