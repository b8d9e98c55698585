// Package natstest gives tests real NATS JetStream servers: the shared one
// (TEST_NATS_URL, or 127.0.0.1:4222) with stream names no other test uses,
// or a private nats-server process a test can stop and start again to
// play the broker going down. Without a server, tests skip loudly, or fail
// under CI=true.
package natstest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultURL is the shared server when TEST_NATS_URL is unset.
const DefaultURL = "nats://127.0.0.1:4222"

// Binary is the nats-server Start runs.
const Binary = "/usr/sbin/nats-server"

// startTimeout bounds how long a server may take to accept connections.
const startTimeout = 10 * time.Second

// URL returns the shared server's URL, after checking that it answers.
func URL(tb testing.TB) string {
	tb.Helper()
	url := sharedURL()
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
	if err != nil {
		unavailable(tb, fmt.Sprintf("NATS at %s does not answer (%v): start nats-server -js or set TEST_NATS_URL", url, err))
	}
	nc.Close()
	return url
}

func sharedURL() string {
	if u := os.Getenv("TEST_NATS_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Names returns a stream name and subject prefix no other test uses (never
// the production PAYNOTIFY_EVENTS), and deletes that stream from the shared
// server when the test ends. A stream on a private server goes with the
// server.
func Names(tb testing.TB) (stream, prefix string) {
	tb.Helper()
	id := randomID()
	stream, prefix = "T_"+id, "t"+id+".events"
	tb.Cleanup(func() {
		nc, err := nats.Connect(sharedURL(), nats.Timeout(2*time.Second))
		if err != nil {
			return // no shared server: nothing was created there
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			tb.Errorf("natstest: %v", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			tb.Errorf("natstest: delete stream %s: %v", stream, err)
		}
	})
	return stream, prefix
}

// JetStream returns a JetStream client of its own on url, closed when the
// test ends: for looking at streams and consumers, and for publishing
// around the code under test.
func JetStream(tb testing.TB, url string) jetstream.JetStream {
	tb.Helper()
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
	if err != nil {
		tb.Fatalf("natstest: connect %s: %v", url, err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("natstest: %v", err)
	}
	return js
}

// Server is a private nats-server process with JetStream. Stop and Start
// keep its port and store directory, so streams, consumers and the clients
// connected to it outlive a restart.
type Server struct {
	tb   testing.TB
	port int
	dir  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	out  *bytes.Buffer // the process's output, shown if it fails to start
}

// Start runs a private nats-server on a free port and waits until it
// accepts connections. It is killed when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	if _, err := os.Stat(Binary); err != nil {
		unavailable(tb, fmt.Sprintf("no %s (%v): install nats-server to run this test", Binary, err))
	}
	s := &Server{tb: tb, port: freePort(tb), dir: tb.TempDir()}
	tb.Cleanup(s.Stop)
	s.Start()
	return s
}

// URL is where clients reach the server.
func (s *Server) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(s.port) }

// Start starts the server (again) and waits until it accepts connections.
// Starting a running server does nothing.
func (s *Server) Start() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	out := &bytes.Buffer{}
	cmd := exec.Command(Binary, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", s.dir)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		s.tb.Fatalf("natstest: start %s: %v", Binary, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done, s.out = cmd, done, out

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	deadline := time.Now().Add(startTimeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return
		}
		select {
		case <-done:
			s.cmd = nil
			s.tb.Fatalf("natstest: nats-server exited at start: %s", out)
		case <-time.After(20 * time.Millisecond): // poll interval
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("natstest: nats-server not accepting on %s after %v: %s", addr, startTimeout, out)
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

// freePort asks the kernel for a port nobody listens on.
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("natstest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// unavailable fails the test under CI=true, where NATS must be there, and
// skips it loudly elsewhere.
func unavailable(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatal("natstest: CI=true but " + why)
	}
	tb.Skip("SKIPPING NATS test: " + why)
}
