package dao

import (
	"context"
	"database/sql/driver"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
)

// go-sql-driver/mysql gives up a statement when its context ends (it
// closes the connection under it), but runs COMMIT and ROLLBACK with no
// context at all: a database that stops answering then holds the request
// until the connection's read timeout, past its deadline and past the
// shutdown grace. boundedConnector closes the connection under a COMMIT
// or ROLLBACK too, when the context the transaction began with ends
// first — the same bound the driver keeps for every other statement.

// boundedConnector makes MySQL connections whose transactions end with
// their context.
type boundedConnector struct {
	inner driver.Connector
}

// newBoundedConnector returns a connector for cfg whose connections
// remember their network connection, to close it at a deadline.
func newBoundedConnector(cfg *mysql.Config) (driver.Connector, error) {
	if cfg.DialFunc == nil && (cfg.Net == "tcp" || cfg.Net == "unix") {
		cfg.DialFunc = dialRemembered
	}
	inner, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return boundedConnector{inner: inner}, nil
}

// rawConnKey carries, in the context of Connect, where to put the network
// connection the driver dials.
type rawConnKey struct{}

// dialRemembered dials as the driver does, and leaves the connection
// where Connect's context says.
func dialRemembered(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err == nil {
		if slot, ok := ctx.Value(rawConnKey{}).(*net.Conn); ok {
			*slot = c
		}
	}
	return c, err
}

// Connect opens a connection and remembers its network connection.
func (b boundedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	var raw net.Conn
	c, err := b.inner.Connect(context.WithValue(ctx, rawConnKey{}, &raw))
	if err != nil {
		return nil, err
	}
	return &boundedConn{Conn: c, raw: raw}, nil
}

// Driver is the MySQL driver.
func (b boundedConnector) Driver() driver.Driver { return b.inner.Driver() }

// boundedConn is a MySQL connection whose transactions end with their
// context. It passes every other call through.
type boundedConn struct {
	driver.Conn
	raw net.Conn // nil if dialled by someone else: then unbounded
	// cut is set once the network connection was closed under a
	// statement: the pool must not hand the connection out again.
	cut atomic.Bool
}

// BeginTx begins a transaction bound to ctx.
func (c *boundedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &boundedTx{Tx: tx, conn: c, ctx: ctx}, nil
}

// bound runs f (a COMMIT or ROLLBACK), closing the connection under it if
// ctx ends first.
func (c *boundedConn) bound(ctx context.Context, f func() error) error {
	if c.raw == nil || ctx.Done() == nil {
		return f()
	}
	stop := context.AfterFunc(ctx, func() {
		c.cut.Store(true)
		c.raw.Close()
	})
	err := f()
	if !stop() && err != nil {
		return fmt.Errorf("%w (connection closed: %w)", err, context.Cause(ctx))
	}
	return err
}

func (c *boundedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c *boundedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c *boundedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c *boundedConn) Ping(ctx context.Context) error { return c.Conn.(driver.Pinger).Ping(ctx) }

func (c *boundedConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

// ResetSession refuses a connection cut under a statement, so the pool
// drops it.
func (c *boundedConn) ResetSession(ctx context.Context) error {
	if c.cut.Load() {
		return driver.ErrBadConn
	}
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

// IsValid reports whether the pool may keep the connection.
func (c *boundedConn) IsValid() bool {
	return !c.cut.Load() && c.Conn.(driver.Validator).IsValid()
}

// boundedTx is a transaction whose COMMIT and ROLLBACK end with ctx.
type boundedTx struct {
	driver.Tx
	conn *boundedConn
	ctx  context.Context
}

func (t *boundedTx) Commit() error   { return t.conn.bound(t.ctx, t.Tx.Commit) }
func (t *boundedTx) Rollback() error { return t.conn.bound(t.ctx, t.Tx.Rollback) }
