package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// requestTimeout bounds one request or transaction, so a stuck service
// fails a cell instead of hanging the tool.
const requestTimeout = 10 * time.Second

// op runs request i of a cell. Each worker gets its own op (its own
// connection), so an op needs no locking.
type op func(ctx context.Context, i int) error

// result is one measured cell.
type result struct {
	n        int
	fails    int64
	firstErr string
	wall     time.Duration
	lat      []time.Duration // sorted
}

func (r result) throughput() float64 { return float64(r.n) / r.wall.Seconds() }

// quantile is the nearest-rank q-quantile of the latencies of successful
// and failed requests alike.
func (r result) quantile(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	i := int(q*float64(len(r.lat))+0.5) - 1
	return r.lat[min(max(i, 0), len(r.lat)-1)]
}

// drive runs requests 0..n-1 on c workers, each request exactly once, and
// times each. newOp makes one worker's op and the function that releases
// its resources.
func drive(ctx context.Context, c, n int, newOp func() (op, func(), error)) (result, error) {
	ops := make([]op, c)
	var closers []func()
	defer func() {
		for _, f := range closers {
			f()
		}
	}()
	for w := range ops {
		o, closeOp, err := newOp()
		if err != nil {
			return result{}, err
		}
		ops[w] = o
		closers = append(closers, closeOp)
	}
	lat := make([]time.Duration, n)
	var (
		next     atomic.Int64
		fails    atomic.Int64
		errOnce  sync.Once
		firstErr string
		wg       sync.WaitGroup
	)
	start := time.Now()
	for _, o := range ops {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				rctx, cancel := context.WithTimeout(ctx, requestTimeout)
				t0 := time.Now()
				err := o(rctx, i)
				lat[i] = time.Since(t0)
				cancel()
				if err != nil {
					fails.Add(1)
					errOnce.Do(func() { firstErr = fmt.Sprintf("request %d: %v", i, err) })
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	slices.Sort(lat)
	return result{n: n, fails: fails.Load(), firstErr: firstErr, wall: wall, lat: lat}, nil
}

// httpClient is one keep-alive HTTP/1.1 connection that writes a whole
// pre-encoded request in one write and reads the answer. It costs far less
// CPU than net/http's client, which matters when the load tool, the
// service and MariaDB share two cores.
type httpClient struct {
	addr   string
	header []byte // request line and headers up to Content-Length's value
	conn   net.Conn
	br     *bufio.Reader
	buf    []byte
}

func newHTTPClient(addr, path string) *httpClient {
	h := "POST " + path + " HTTP/1.1\r\n" +
		"Host: " + addr + "\r\n" +
		"User-Agent: Mozilla/4.0\r\n" +
		"Content-Type: application/x-www-form-urlencoded; charset=utf-8\r\n"
	return &httpClient{addr: addr, header: []byte(h)}
}

// newJSONClient is newHTTPClient for a JSON body (WeChat Pay's).
func newJSONClient(addr, path string) *httpClient {
	h := "POST " + path + " HTTP/1.1\r\n" +
		"Host: " + addr + "\r\n" +
		"User-Agent: Mozilla/4.0\r\n" +
		"Content-Type: application/json\r\n"
	return &httpClient{addr: addr, header: []byte(h)}
}

// post sends body and returns the answer's body; any status but 200 is an
// error.
func (c *httpClient) post(ctx context.Context, body []byte) ([]byte, error) {
	return c.postWith(ctx, nil, body, http.StatusOK)
}

// postWith sends body after the header lines extra (each ending CRLF) and
// returns the answer's body; any status but want is an error.
func (c *httpClient) postWith(ctx context.Context, extra, body []byte, want int) ([]byte, error) {
	if c.conn == nil {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", c.addr)
		if err != nil {
			return nil, err
		}
		c.conn, c.br = conn, bufio.NewReaderSize(conn, 4096)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(requestTimeout)
	}
	_ = c.conn.SetDeadline(deadline)
	c.buf = append(c.buf[:0], c.header...)
	c.buf = append(c.buf, extra...)
	c.buf = append(c.buf, "Content-Length: "...)
	c.buf = strconv.AppendInt(c.buf, int64(len(body)), 10)
	c.buf = append(c.buf, "\r\n\r\n"...)
	c.buf = append(c.buf, body...)
	if _, err := c.conn.Write(c.buf); err != nil {
		c.close()
		return nil, err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.close()
		return nil, err
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	if err != nil || resp.Close {
		c.close()
	}
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return answer, fmt.Errorf("HTTP %d: %q", resp.StatusCode, clip(answer))
	}
	return answer, nil
}

func (c *httpClient) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn, c.br = nil, nil
	}
}

// notifyOps makes workers that post bodies[order[i]] and want "success".
// With several addresses (instances of the service) request i goes to
// addrs[i % len(addrs)]: round-robin, each worker keeping a connection to
// every instance.
func notifyOps(addrs []string, bodies [][]byte, order []int) func() (op, func(), error) {
	return func() (op, func(), error) {
		clients := make([]*httpClient, len(addrs))
		for k, addr := range addrs {
			clients[k] = newHTTPClient(addr, "/alipay/notify")
		}
		o := func(ctx context.Context, i int) error {
			answer, err := clients[i%len(clients)].post(ctx, bodies[order[i]])
			if err != nil {
				return err
			}
			if !bytes.Equal(answer, []byte("success")) {
				return fmt.Errorf("answer %q, want \"success\"", clip(answer))
			}
			return nil
		}
		closeAll := func() {
			for _, c := range clients {
				c.close()
			}
		}
		return o, closeAll, nil
	}
}

func clip(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}
