// Package redistest gives tests real Redis servers: the shared one
// (TEST_REDIS_ADDR, or 127.0.0.1:6379), where each test uses keys no other
// test uses, or a private redis-server process a test can stop to play
// Redis going down. Without a server, tests skip loudly, or fail under
// CI=true.
package redistest

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultAddr is the shared server when TEST_REDIS_ADDR is unset.
const DefaultAddr = "127.0.0.1:6379"

// Binary is the redis-server Start runs.
const Binary = "/usr/bin/redis-server"

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 10 * time.Second

// Addr returns the shared server's address, after checking that it
// answers PING. Tests sharing it must use keys of their own (see Prefix).
func Addr(tb testing.TB) string {
	tb.Helper()
	addr := os.Getenv("TEST_REDIS_ADDR")
	if addr == "" {
		addr = DefaultAddr
	}
	if err := ping(addr, 2*time.Second); err != nil {
		unavailable(tb, fmt.Sprintf("Redis at %s does not answer (%v): start redis-server or set TEST_REDIS_ADDR", addr, err))
	}
	return addr
}

// Prefix returns a key prefix no other test (in any package, in any run)
// uses, ending in ":".
func Prefix(tb testing.TB) string {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "test:" + hex.EncodeToString(b[:]) + ":"
}

// Server is a private redis-server process without persistence: Stop
// takes Redis down as a crash would, and everything in it goes.
type Server struct {
	tb   testing.TB
	port int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	out  *bytes.Buffer // the process's output, shown if it fails to start
}

// Start runs a private redis-server on a free port and waits until it
// answers PING. It is killed when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	if _, err := os.Stat(Binary); err != nil {
		unavailable(tb, fmt.Sprintf("no %s (%v): install redis-server to run this test", Binary, err))
	}
	s := &Server{tb: tb, port: freePort(tb)}
	tb.Cleanup(s.Stop)
	s.Start()
	return s
}

// Addr is where clients reach the server.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Start starts the server (again, empty) on its port and waits until it
// answers PING. Starting a running server does nothing.
func (s *Server) Start() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	out := &bytes.Buffer{}
	cmd := exec.Command(Binary, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		s.tb.Fatalf("redistest: start %s: %v", Binary, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done, s.out = cmd, done, out

	deadline := time.Now().Add(startTimeout)
	for {
		err := ping(s.Addr(), 200*time.Millisecond)
		if err == nil {
			return
		}
		select {
		case <-done:
			s.cmd = nil
			s.tb.Fatalf("redistest: redis-server exited at start: %s", out)
		case <-time.After(20 * time.Millisecond): // poll interval
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("redistest: redis-server not answering on %s after %v (%v): %s", s.Addr(), startTimeout, err, out)
		}
	}
}

// Stop kills the server, as a crash would, and waits for it to exit.
// Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// ping sends PING in RESP and expects +PONG, within timeout.
func ping(addr string, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// freePort asks the kernel for a port nobody listens on.
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// unavailable fails the test under CI=true, where Redis must be there, and
// skips it loudly elsewhere.
func unavailable(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatal("redistest: CI=true but " + why)
	}
	tb.Skip("SKIPPING Redis test: " + why)
}
