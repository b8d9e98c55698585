// Package daotest opens real, freshly migrated databases for tests: SQLite
// always, MySQL/MariaDB when TEST_MYSQL_DSN is set (under CI, whatever
// its value, it must be). Each store is a new database, dropped when the test ends.
package daotest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-sql-driver/mysql"

	"paynotify/dao"
	"paynotify/internal/proctest"
)

// Drivers lists the databases every storage test runs against.
var Drivers = []string{dao.DriverSQLite, dao.DriverMySQL}

// ForEach runs fn once per database, each as a subtest with its own fresh
// store.
func ForEach(t *testing.T, fn func(t *testing.T, store *dao.Store)) {
	t.Helper()
	for _, driver := range Drivers {
		t.Run(driver, func(t *testing.T) {
			fn(t, Open(t, driver))
		})
	}
}

// Open returns a migrated store on a new database. Without TEST_MYSQL_DSN
// a MySQL test is skipped loudly, or fails under CI.
func Open(tb testing.TB, driver string) *dao.Store {
	tb.Helper()
	ctx := context.Background()
	var dsn string
	switch driver {
	case dao.DriverSQLite:
		dsn = filepath.Join(tb.TempDir(), "test.db")
	case dao.DriverMySQL:
		dsn = MySQLDatabase(tb)
	default:
		tb.Fatalf("daotest: unknown driver %q", driver)
	}
	store, err := dao.Open(ctx, driver, dsn, dao.Options{MaxOpenConns: 24})
	if err != nil {
		tb.Fatalf("daotest: open %s: %v", driver, err)
	}
	tb.Cleanup(func() { store.Close() })
	if err := store.Migrate(ctx); err != nil {
		tb.Fatalf("daotest: migrate %s: %v", driver, err)
	}
	return store
}

// MySQLDatabase creates an empty database on the TEST_MYSQL_DSN server,
// drops it when the test ends, and returns a DSN for it.
func MySQLDatabase(tb testing.TB) string {
	tb.Helper()
	base := os.Getenv("TEST_MYSQL_DSN")
	if base == "" {
		proctest.Unavailable(tb, "MySQL/MariaDB", "TEST_MYSQL_DSN is not set: set it (e.g. root@tcp(127.0.0.1:3306)/) to run this test")
	}
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		tb.Fatalf("daotest: TEST_MYSQL_DSN: %v", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "paynotify_t_" + hex.EncodeToString(b[:])

	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		tb.Fatalf("daotest: %v", err)
	}
	if _, err := admin.Exec("CREATE DATABASE " + name + " CHARACTER SET utf8mb4"); err != nil {
		admin.Close()
		tb.Fatalf("daotest: create database: %v", err)
	}
	tb.Cleanup(func() {
		defer admin.Close()
		if _, err := admin.Exec("DROP DATABASE IF EXISTS " + name); err != nil {
			tb.Errorf("daotest: drop database %s: %v", name, err)
		}
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}
