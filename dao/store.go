// Package dao is paynotify's storage: SQL over GORM for MySQL/MariaDB and
// the embedded SQLite. It turns driver errors into model errors, so nothing
// above it imports a driver.
//
// Lock order, everywhere: the order row first, then its payment rows. Every
// read that locks says so in its name (OrderForUpdate, PaymentForUpdate).
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
}

// Store reads and writes paynotify's tables. A Store made by Tx is bound
// to that transaction.
type Store struct {
	db     *gorm.DB
	driver string
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
		full, err := MySQLDSN(dsn)
		if err != nil {
			return nil, err
		}
		dialector = gormmysql.New(gormmysql.Config{DSN: full, SkipInitializeWithVersion: true})
	case DriverSQLite:
		if err := checkSQLitePath(dsn); err != nil {
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
	s := &Store{db: db, driver: driver}
	if err := s.Ping(ctx); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("connect %s: %w", driver, err)
	}
	return s, nil
}

// MySQLDSN completes a go-sql-driver DSN: times are parsed and kept in UTC
// (on the connection too), parameters are interpolated client-side (one
// round trip per statement), and dial, read and write time out so a silent
// database fails a request instead of hanging it.
func MySQLDSN(dsn string) (string, error) {
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
	if c.ReadTimeout == 0 {
		c.ReadTimeout = 30 * time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 30 * time.Second
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

// SQLiteDSN turns a file path into a DSN: WAL, a busy timeout, and write
// transactions that take the write lock at BEGIN (so two never deadlock
// upgrading a read lock).
func SQLiteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate"
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

// Tx runs fn in one transaction, handing it a Store bound to that
// transaction. fn's error rolls everything back; so does a failed commit.
func (s *Store) Tx(ctx context.Context, fn func(tx *Store) error) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return fn(&Store{db: tx, driver: s.driver})
	})
	return mapErr(err)
}

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
// connection). A statement the server rejected is not this.
func isUnavailable(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return false
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, driverBadConn) || isNetErr(err)
}

// MigrationsPending reports whether the schema is behind this binary.
func (s *Store) MigrationsPending(ctx context.Context) (bool, error) {
	return migrations.Pending(ctx, s.SQL(), s.driver)
}
