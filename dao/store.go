// Package dao is paynotify's storage: SQL over GORM for MySQL/MariaDB and
// the embedded SQLite. It turns driver errors into model errors, so nothing
// above it imports a driver.
//
// One lock order for every transaction: request key → order row → the
// order's payment, attempt and refund rows → SKU rows in ascending id →
// coupon → member; outbox rows are new rows, written at any point. The
// code enforces it rather than a comment:
//
//   - A transaction begins only in an entry point: UpdateOrder (locks one
//     order, FOR UPDATE or FOR UPDATE SKIP LOCKED, and hands its callback
//     an OrderTx), UpdateOrders (locks a group of orders with one
//     statement in id order, hands an OrdersTx, and does not retry),
//     PlaceOrder (records the request key and hands a PlaceTx),
//     UpdateOrderless (a payment that has no order, its row the first
//     lock), UpdateOutbox, UpdateJournal, UpdateSession and
//     UpdateReconItem (no order at all), and the self-contained ones
//     (ClaimRefunds, ClaimAttemptsToQuery, ClaimRun, FinishRun,
//     RecordUnmatched, RequestForUpdateNoWait). Each retries deadlocks and
//     lock-wait timeouts a bounded number of times within the caller's
//     deadline, but for UpdateOrders and RequestForUpdateNoWait.
//   - A transaction type reaches only what comes after its first lock:
//     OrderTx cannot lock another order, and steps back in the order (a
//     payment after stock, stock after the coupon) fail with ErrLockOrder;
//     PlaceTx locks SKUs once, in ascending id, and reserves only those.
//   - Inside a transaction (its callback's ctx) the outer Store and the
//     entry points refuse to work with ErrInTx, instead of deadlocking
//     against the transaction's own connection (SQLite has one).
//
// Every read that locks says so in its name (PaymentForUpdate,
// SKUsForUpdate) or at the call site (UpdateOrder's Lock).
package dao

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"paynotify/migrations"
)

// Drivers Open accepts.
const (
	DriverMySQL  = "mysql"
	DriverSQLite = "sqlite"
)

// Options tunes the connection pool.
type Options struct {
	// MaxOpenConns caps MySQL connections (SQLite always uses one).
	MaxOpenConns int
	// IOTimeout bounds every wait on a MySQL connection that no context
	// ends sooner — a background job's statement, say (the DSN's
	// readTimeout and writeTimeout, unless DB_DSN sets them). Zero means
	// 30 s; NoIOTimeout, none (migrations: an ALTER of a big table may run
	// for many minutes). A statement, COMMIT or ROLLBACK whose context
	// ends first is given up at once, the connection closed under it.
	IOTimeout time.Duration
}

// NoIOTimeout is an Options.IOTimeout: no read or write timeout, waits
// bounded by contexts only.
const NoIOTimeout time.Duration = -1

// Store reads and writes paynotify's tables. Its own methods are plain
// reads and single statements; every transaction goes through an entry
// point (UpdateOrder, PlaceOrder, UpdateOutbox, UpdateJournal,
// UpdateSession, the Claim… methods), and inside one the Store refuses to work (ErrInTx).
type Store struct {
	db     *gorm.DB
	driver string
	trace  func(sql string) // see Trace
	ready  *readiness       // see Ready
}

// Open connects to the database and checks that it answers.
func Open(ctx context.Context, driver, dsn string, opt Options) (*Store, error) {
	cfg := &gorm.Config{
		SkipDefaultTransaction: true,
		Logger:                 logger.Discard,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	}
	var dialector gorm.Dialector
	switch driver {
	case DriverMySQL:
		full, err := mysqlDSN(dsn, opt.IOTimeout)
		if err != nil {
			return nil, err
		}
		mcfg, err := mysql.ParseDSN(full)
		if err != nil {
			return nil, err
		}
		connector, err := newBoundedConnector(mcfg)
		if err != nil {
			return nil, fmt.Errorf("DB_DSN: %w", err)
		}
		dialector = gormmysql.New(gormmysql.Config{DSN: full, Conn: sql.OpenDB(connector), SkipInitializeWithVersion: true})
	case DriverSQLite:
		if err := CheckSQLitePath(dsn); err != nil {
			return nil, err
		}
		dialector = sqlite.Open(SQLiteDSN(dsn))
	default:
		return nil, fmt.Errorf("DB_DRIVER %q: want mysql or sqlite", driver)
	}
	db, err := gorm.Open(dialector, cfg)
	if err != nil && driver == DriverSQLite {
		return nil, explainSQLiteOpen(dsn, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", driver, err)
	}
	if err := guardTx(db); err != nil {
		return nil, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	if driver == DriverSQLite {
		// One writer at a time is SQLite's model; one connection makes
		// waiting for it a pool wait that honours the request's deadline.
		sqlDB.SetMaxOpenConns(1)
	} else {
		n := opt.MaxOpenConns
		if n <= 0 {
			n = 32
		}
		sqlDB.SetMaxOpenConns(n)
		sqlDB.SetMaxIdleConns(n)
		sqlDB.SetConnMaxLifetime(30 * time.Minute)
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	}
	s := &Store{db: db, driver: driver, ready: &readiness{}}
	if err := s.Ping(ctx); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("connect %s: %w", driver, err)
	}
	if driver == DriverMySQL {
		return s.onGalera(ctx, dsn, opt)
	}
	return s, nil
}

// onGalera returns s, or, if its server is a Galera node and the DSN does
// not say otherwise, a store whose every connection runs with
// wsrep_sync_wait=1: each read first waits until this node has applied
// every write the cluster committed before it. Without it a node a moment
// behind reads an order another node has just created as absent, and a
// notification for that order would be recorded UNMATCHED (money refunded
// instead of an order paid), an attempt would go unseen, an API client
// would get a 404 for the order it just placed. A write needs no wait: a
// write based on a stale read conflicts at certification (1213) and is
// retried. The cost is a round of the group's messaging per read
// (BENCHMARKS.md).
func (s *Store) onGalera(ctx context.Context, dsn string, opt Options) (*Store, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("DB_DSN: %w", err)
	}
	if _, set := cfg.Params["wsrep_sync_wait"]; set {
		return s, nil
	}
	st, err := s.serverState(ctx)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("connect mysql: %w", err)
	}
	if !st.galera {
		return s, nil
	}
	s.Close()
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["wsrep_sync_wait"] = "1"
	return Open(ctx, DriverMySQL, cfg.FormatDSN(), opt)
}

// MySQLDSN completes a go-sql-driver DSN: times are parsed and kept in UTC
// (on the connection too), parameters are interpolated client-side (one
// round trip per statement), and dial, read and write time out so a silent
// database fails what no context bounds instead of hanging it.
func MySQLDSN(dsn string) (string, error) { return mysqlDSN(dsn, 0) }

// mysqlDSN is MySQLDSN with reads and writes timing out after ioTimeout
// (zero means 30 s, NoIOTimeout never) unless the DSN says otherwise.
func mysqlDSN(dsn string, ioTimeout time.Duration) (string, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("DB_DSN: %w", err)
	}
	c.ParseTime = true
	if c.Loc == nil {
		c.Loc = time.UTC
	}
	c.InterpolateParams = true
	if c.Timeout == 0 {
		c.Timeout = 3 * time.Second
	}
	switch {
	case ioTimeout == 0:
		ioTimeout = 30 * time.Second
	case ioTimeout < 0:
		ioTimeout = 0 // the driver's "none"
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = ioTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = ioTimeout
	}
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	if _, ok := c.Params["time_zone"]; !ok {
		c.Params["time_zone"] = "'+00:00'"
	}
	// Our transactions last milliseconds: a lock held for seconds is a
	// request still in flight or a stuck peer, and the waiter should give
	// up (model.ErrRetryable) well before its own deadline.
	if _, ok := c.Params["innodb_lock_wait_timeout"]; !ok {
		c.Params["innodb_lock_wait_timeout"] = "3"
	}
	return c.FormatDSN(), nil
}

// SQLiteDSN turns a file path into a DSN: WAL, a busy timeout, write
// transactions that take the write lock at BEGIN (so two never deadlock
// upgrading a read lock), and recursive triggers — without them the rows
// INSERT OR REPLACE deletes fire no delete trigger, and admin_audit's
// would not stop a rewrite.
func SQLiteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=recursive_triggers(1)&_txlock=immediate"
}

// Trace makes the store tell fn every statement it runs — its SQL with
// placeholders, as rendered for this driver — and BEGIN, COMMIT or
// ROLLBACK around each transaction, so tests can pin the SQL a use case
// runs. Call it before the store is used.
func (s *Store) Trace(fn func(sql string)) error {
	s.trace = fn
	record := func(db *gorm.DB) {
		if db.Statement.SQL.Len() > 0 {
			fn(db.Statement.SQL.String())
		}
	}
	cb := s.db.Callback()
	for _, err := range []error{
		cb.Create().After("gorm:create").Register("dao:trace", record),
		cb.Query().After("gorm:query").Register("dao:trace", record),
		cb.Update().After("gorm:update").Register("dao:trace", record),
		cb.Delete().After("gorm:delete").Register("dao:trace", record),
		cb.Row().After("gorm:row").Register("dao:trace", record),
		cb.Raw().After("gorm:raw").Register("dao:trace", record),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// Driver says which database family this store talks to.
func (s *Store) Driver() string { return s.driver }

// SQL exposes the pool, for migrations, metrics and tests.
func (s *Store) SQL() *sql.DB {
	db, _ := s.db.DB()
	return db
}

// Migrate applies the schema migrations for this store's driver.
func (s *Store) Migrate(ctx context.Context) error {
	return migrations.Up(ctx, s.SQL(), s.driver)
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return mapErr(s.SQL().PingContext(ctx))
}

// Close closes the pool.
func (s *Store) Close() error { return s.SQL().Close() }

// mapErr turns driver errors into model errors; other errors pass through.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if isMapped(err) {
		return err
	}
	if isRetryable(err) {
		return fmt.Errorf("%w: %v", errRetryable, err)
	}
	if isUnavailable(err) {
		return fmt.Errorf("%w: %v", errUnavailable, err)
	}
	return err
}

// isUnavailable: the database did not answer (deadline, lost or refused
// connection), or answered that it cannot serve now (unavailableErrors).
// Any other statement the server rejected is not this.
func isUnavailable(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return unavailableErrors[me.Number]
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, driverBadConn) || isNetErr(err)
}

// MigrationsPending reports whether the schema is behind this binary.
func (s *Store) MigrationsPending(ctx context.Context) (bool, error) {
	return migrations.Pending(ctx, s.SQL(), s.driver)
}
