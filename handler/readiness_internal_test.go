package handler

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// /readyz logs a change of readiness once, not each probe: down three
// times is one WARN, back up one INFO, down again one WARN.
func TestReadinessLogsChanges(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var r readiness
	down := errors.New("not ready: Galera node is Joining")
	for _, err := range []error{nil, down, down, down, nil, nil, down} {
		r.log(log, err)
	}
	warns, infos := strings.Count(buf.String(), `level=WARN msg="not ready"`), strings.Count(buf.String(), `level=INFO msg="ready again"`)
	if warns != 2 || infos != 1 || strings.Count(buf.String(), "\n") != 3 {
		t.Fatalf("logged:\n%s", buf.String())
	}
}
