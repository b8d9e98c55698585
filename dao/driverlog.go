package dao

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
)

// The MySQL driver reports what it cannot return to a caller — a
// connection closed under a statement whose deadline passed, a bad idle
// connection thrown away — through a logger of its own, which writes
// plain text to stderr, into the middle of serve's JSON log. driverLog
// writes those through the process's slog logger instead, at WARN.
type driverLog struct{}

// driverLogger is the logger driverLog writes to: the last one
// SetDriverLogger was given (one per process outside tests).
var driverLogger atomic.Pointer[slog.Logger]

// RouteDriverLog sends the MySQL driver's own reports to the logger
// SetDriverLogger was last given (slog's default until then). Call it once
// at start, before any goroutine: the driver keeps its logger in a plain
// global.
func RouteDriverLog() error {
	return mysql.SetLogger(driverLog{})
}

// SetDriverLogger makes log the logger the driver's reports go to, once
// RouteDriverLog has routed them; safe at any time.
func SetDriverLogger(log *slog.Logger) { driverLogger.Store(log) }

func (driverLog) Print(v ...any) {
	log := driverLogger.Load()
	if log == nil {
		log = slog.Default()
	}
	log.Warn("mysql driver", "detail", strings.TrimSpace(fmt.Sprintln(v...)))
}
