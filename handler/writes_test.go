package handler_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"paynotify/dao"
	"paynotify/dao/daotest"
)

// countingListener counts the writes to the connections it accepts.
type countingListener struct {
	net.Listener
	writes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, writes: &l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// Every answer on the notify path is one write to the socket — status
// line, headers and body together — and the connection is kept alive:
// a first notice, its duplicate and a refusal, on one connection.
func TestNotifyAnswersInOneWrite(t *testing.T) {
	store := daotest.Open(t, dao.DriverSQLite)
	s := newServer(t, store)
	mustOrder(t, store, "ONE-1", "20.00")
	body := s.signedBody(t, paidForm("ONE-1", "T-ONE-1", "20.00"))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	srv := &http.Server{Handler: s.h}
	go func() { _ = srv.Serve(cl) }()
	t.Cleanup(func() { _ = srv.Close() })

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for _, c := range []struct {
		name, body, want string
	}{
		{"first notice", body, "success"},
		{"duplicate", body, "success"},
		{"refusal", strings.Replace(body, "sign=", "sign=A", 1), "failure"},
	} {
		before := cl.writes.Load()
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded; charset=utf-8\r\nContent-Length: %d\r\n\r\n%s",
			notifyPath, len(c.body), c.body)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(answer) != c.want || resp.Close {
			t.Fatalf("%s: %d %q (close %v), want %q on a kept connection", c.name, resp.StatusCode, answer, resp.Close, c.want)
		}
		if n := cl.writes.Load() - before; n != 1 {
			t.Errorf("%s: answered in %d writes, want 1", c.name, n)
		}
	}
}
