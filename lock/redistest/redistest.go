// Package redistest gives tests real Redis servers: the shared one
// (TEST_REDIS_ADDR, or 127.0.0.1:6379), where each test uses keys no other
// test uses, or a private redis-server process a test can stop to play
// Redis going down. Without a server, tests skip loudly, or fail under
// CI.
package redistest

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"paynotify/internal/proctest"
)

// DefaultAddr is the shared server when TEST_REDIS_ADDR is unset.
const DefaultAddr = "127.0.0.1:6379"

// Binary is the redis-server Start runs.
const Binary = "/usr/bin/redis-server"

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
// takes Redis down as a crash would, and everything in it goes; Start
// brings it back, empty, on the same port.
type Server struct {
	*proctest.Process
}

// Start runs a private redis-server on a free port and waits until it
// answers PING. It is killed when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return &Server{proctest.Start(tb, proctest.Spec{
		Name:   "redis-server",
		Binary: Binary,
		Args: func(port int) []string {
			return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}
		},
		Ready: ping,
	})}
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

// unavailable fails the test under CI, where Redis must be there, and
// skips it loudly elsewhere.
func unavailable(tb testing.TB, why string) {
	tb.Helper()
	proctest.Unavailable(tb, "Redis", why)
}
