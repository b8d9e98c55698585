package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"paynotify/dao"
	"paynotify/dao/daotest"
)

// TestWarnAuditGrants: serve's (and migrate's) warning for a user holding
// DROP — root here — says plainly that it can erase the audit trail; on
// SQLite, which has no users, it says nothing.
func TestWarnAuditGrants(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		var buf bytes.Buffer
		warnAuditGrants(t.Context(), slog.New(slog.NewTextHandler(&buf, nil)), store)
		if store.Driver() == dao.DriverSQLite {
			if buf.Len() != 0 {
				t.Fatalf("SQLite: %s", &buf)
			}
			return
		}
		for _, want := range []string{"holds DROP", "can erase the audit trail", "SET FOREIGN_KEY_CHECKS=0; TRUNCATE TABLE admin_audit",
			"GRANT SELECT, INSERT, UPDATE, DELETE"} {
			if !strings.Contains(buf.String(), want) {
				t.Errorf("warning does not say %q:\n%s", want, &buf)
			}
		}
	})
}
