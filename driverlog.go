package main

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

// driverLogger is the logger driverLog writes to: the last one newLogger
// made (one per process outside tests).
var driverLogger atomic.Pointer[slog.Logger]

func init() {
	// At init, before any goroutine: SetLogger writes a plain global.
	if err := mysql.SetLogger(driverLog{}); err != nil {
		panic(err)
	}
}

func (driverLog) Print(v ...any) {
	log := driverLogger.Load()
	if log == nil {
		log = slog.Default()
	}
	log.Warn("mysql driver", "detail", strings.TrimSpace(fmt.Sprintln(v...)))
}
