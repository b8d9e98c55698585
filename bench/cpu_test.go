package main

import (
	"context"
	"database/sql"
	"os"
	"testing"

	_ "github.com/go-sql-driver/mysql"
)

// The meter's "mariadb" is the server the tool is connected to: the
// CPU a query makes that server spend is what it counts, whatever other
// MariaDB servers run on the machine (with -galera there are four more).
func TestServerPIDMetersTheServerUsed(t *testing.T) {
	dsn := os.Getenv("TEST_MYSQL_DSN")
	if dsn == "" {
		t.Skip("TEST_MYSQL_DSN is not set (e.g. root@tcp(127.0.0.1:3306)/)")
	}
	ctx := context.Background()
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	pid := serverPID(ctx, admin)
	if pid == 0 {
		t.Fatal("serverPID: 0, want the pid of the server on " + dsn)
	}
	m := newCPUMeter(pid)
	s0 := m.snap()
	var n int
	// About a CPU-second of the server's own work.
	if err := admin.QueryRowContext(ctx, "SELECT BENCHMARK(3000000, SHA2('paynotify', 256))").Scan(&n); err != nil {
		t.Fatal(err)
	}
	use := s0.to(m.snap())
	if use.mariadb < 0.2 {
		t.Errorf("the server spent %.2f CPU-seconds on the query by the meter (other work %.2f): it meters another process", use.mariadb, use.other)
	}
}
