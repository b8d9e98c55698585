package dao

import (
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Reads and writes time out after the given I/O timeout, 30 s by default,
// never with NoIOTimeout, and as the DSN says when it says.
func TestMySQLDSNTimeouts(t *testing.T) {
	for _, c := range []struct {
		name      string
		dsn       string
		io        time.Duration
		read, wrt time.Duration
	}{
		{"Default", "root@tcp(127.0.0.1:3306)/p", 0, 30 * time.Second, 30 * time.Second},
		{"Given", "root@tcp(127.0.0.1:3306)/p", 10 * time.Second, 10 * time.Second, 10 * time.Second},
		{"None", "root@tcp(127.0.0.1:3306)/p", NoIOTimeout, 0, 0},
		{"DSNWins", "root@tcp(127.0.0.1:3306)/p?readTimeout=5m&writeTimeout=1m", NoIOTimeout, 5 * time.Minute, time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			full, err := mysqlDSN(c.dsn, c.io)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := mysql.ParseDSN(full)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ReadTimeout != c.read || cfg.WriteTimeout != c.wrt {
				t.Errorf("readTimeout %v, writeTimeout %v; want %v, %v", cfg.ReadTimeout, cfg.WriteTimeout, c.read, c.wrt)
			}
		})
	}
}
