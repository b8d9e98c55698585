package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"paynotify/config"
)

// serve's JSON log writes durations as people write them: the start-up
// line's pay timeout reads "30m0s", not 1800000000000 nanoseconds.
func TestLogDurationsReadable(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, slog.LevelInfo, true)
	log.Info("starting", "config", config.Config{OrderPayTimeout: 30 * time.Minute}, "interval", 5*time.Second)
	for _, want := range []string{`"order_pay_timeout":"30m0s"`, `"interval":"5s"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log line lacks %s:\n%s", want, &buf)
		}
	}
}
