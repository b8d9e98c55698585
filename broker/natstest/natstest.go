// Package natstest gives tests real NATS JetStream servers: the shared one
// (TEST_NATS_URL, or 127.0.0.1:4222) with stream names no other test uses,
// or a private nats-server process a test can stop and start again to
// play the broker going down. Without a server, tests skip loudly, or fail
// under CI.
package natstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"paynotify/internal/proctest"
)

// DefaultURL is the shared server when TEST_NATS_URL is unset.
const DefaultURL = "nats://127.0.0.1:4222"

// Binary is the nats-server Start runs.
const Binary = "/usr/sbin/nats-server"

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
	*proctest.Process
	name string // the node's server name, in a cluster
}

// Start runs a private nats-server on a free port and waits until it
// accepts connections. It is killed when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	dir := tb.TempDir()
	return &Server{Process: proctest.Start(tb, proctest.Spec{
		Name:   "nats-server",
		Binary: Binary,
		Args: func(port int) []string {
			return []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", dir}
		},
		Ready: proctest.Dial,
	})}
}

// URL is where clients reach the server.
func (s *Server) URL() string { return "nats://" + s.Addr() }

// Name is the node's server name in a cluster (n1, n2, ...).
func (s *Server) Name() string { return s.name }

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// unavailable fails the test under CI, where NATS must be there, and
// skips it loudly elsewhere.
func unavailable(tb testing.TB, why string) {
	tb.Helper()
	proctest.Unavailable(tb, "NATS", why)
}
