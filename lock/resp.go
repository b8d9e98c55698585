package lock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// pool is a few connections to one Redis, speaking RESP2: commands are
// arrays of bulk strings; replies are simple strings, errors, integers and
// bulk strings (nil for a missing value) — all the lock reads.
type pool struct {
	addr    string
	timeout time.Duration // dial, and each command's write and read

	mu     sync.Mutex
	idle   []*conn
	closed bool
}

type conn struct {
	nc net.Conn
	r  *bufio.Reader
}

// maxIdle is how many connections the pool keeps for reuse.
const maxIdle = 8

func newPool(addr string, timeout time.Duration) *pool { return &pool{addr: addr, timeout: timeout} }

// do runs one command and returns its reply: a string, an int64, or nil.
// A Redis error reply is an error; so is a connection that fails, which
// is then closed. A reused connection that fails (Redis restarted since)
// is tried once more on a fresh one.
func (p *pool) do(ctx context.Context, args ...string) (any, error) {
	c, reused, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	reply, err := c.do(ctx, p.timeout, args)
	var redisErr replyError
	if err != nil && reused && !errors.As(err, &redisErr) && ctx.Err() == nil {
		c.nc.Close()
		if c, err = p.dial(ctx); err != nil {
			return nil, err
		}
		reply, err = c.do(ctx, p.timeout, args)
	}
	if err != nil && !errors.As(err, &redisErr) {
		c.nc.Close()
		return nil, err
	}
	p.put(c)
	return reply, err
}

func (p *pool) get(ctx context.Context) (c *conn, reused bool, err error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, false, errClosed
	}
	if n := len(p.idle); n > 0 {
		c = p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, true, nil
	}
	p.mu.Unlock()
	c, err = p.dial(ctx)
	return c, false, err
}

func (p *pool) dial(ctx context.Context) (*conn, error) {
	d := net.Dialer{Timeout: p.timeout}
	nc, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	return &conn{nc: nc, r: bufio.NewReader(nc)}, nil
}

func (p *pool) put(c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) >= maxIdle {
		c.nc.Close()
		return
	}
	p.idle = append(p.idle, c)
}

func (p *pool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.idle {
		c.nc.Close()
	}
	p.idle = nil
	return nil
}

// errClosed: the locker was closed; it dials no more.
var errClosed = errors.New("redis: client is closed")

// replyError is an error reply of Redis (-ERR …): the connection is fine.
type replyError string

func (e replyError) Error() string { return "redis: " + string(e) }

// do writes one command and reads its reply, within timeout and ctx's
// deadline.
func (c *conn) do(ctx context.Context, timeout time.Duration, args []string) (any, error) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.nc.SetDeadline(deadline); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, 64)
	buf = append(buf, '*')
	buf = strconv.AppendInt(buf, int64(len(args)), 10)
	buf = append(buf, "\r\n"...)
	for _, a := range args {
		buf = append(buf, '$')
		buf = strconv.AppendInt(buf, int64(len(a)), 10)
		buf = append(buf, "\r\n"...)
		buf = append(buf, a...)
		buf = append(buf, "\r\n"...)
	}
	if _, err := c.nc.Write(buf); err != nil {
		return nil, err
	}
	return c.read()
}

func (c *conn) read() (any, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("redis: malformed reply %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return body, nil
	case '-':
		return nil, replyError(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > 1<<20 {
			return nil, fmt.Errorf("redis: malformed bulk length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, b); err != nil {
			return nil, err
		}
		return string(b[:n]), nil
	}
	return nil, fmt.Errorf("redis: unexpected reply %q", line)
}
