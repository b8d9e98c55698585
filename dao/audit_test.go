package dao_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
)

func TestAuditAppendOnly(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		ctx := t.Context()
		id := int64(7)
		a := model.Audit{Key: "k-0123456789abcdef", Operator: "alice", Action: model.AuditRefundRetry, OrderID: &id,
			TargetKind: model.TargetRefund, TargetID: "AS-7-x", Before: "REFUND_FAILED", After: "REFUNDING", Note: "退款重试"}
		insert := func(a model.Audit) error {
			return store.UpdateSession(ctx, func(ctx context.Context, tx *dao.SessionTx) error { return tx.InsertAudit(ctx, a) })
		}
		if err := insert(a); err != nil {
			t.Fatalf("insert: %v", err)
		}
		a.Note = "a second post of the same form"
		if err := insert(a); !errors.Is(err, model.ErrAlreadyDone) {
			t.Fatalf("same key again: %v, want ErrAlreadyDone", err)
		}
		db := store.SQL()
		if _, err := db.ExecContext(ctx, "UPDATE admin_audit SET note = 'rewritten'"); err == nil {
			t.Error("UPDATE admin_audit succeeded: it must be append-only")
		}
		if _, err := db.ExecContext(ctx, "DELETE FROM admin_audit"); err == nil {
			t.Error("DELETE FROM admin_audit succeeded: it must be append-only")
		}
		// TRUNCATE fires no trigger on MariaDB; INSERT OR REPLACE deletes
		// the row it replaces on SQLite. Both through the service's own
		// connections.
		if store.Driver() == dao.DriverMySQL {
			if _, err := db.ExecContext(ctx, "TRUNCATE TABLE admin_audit"); err == nil {
				t.Error("TRUNCATE TABLE admin_audit succeeded: it must be append-only")
			}
		} else {
			for _, q := range []string{
				"INSERT OR REPLACE INTO admin_audit (id, action_key, operator, action, note) SELECT id, 'k-replaced', operator, action, 'rewritten' FROM admin_audit",
				"INSERT OR REPLACE INTO admin_audit (action_key, operator, action, note) VALUES ('k-0123456789abcdef', 'mallory', 'refund.retry', 'rewritten')",
				"REPLACE INTO admin_audit (action_key, operator, action, note) VALUES ('k-0123456789abcdef', 'mallory', 'refund.retry', 'rewritten')",
			} {
				if _, err := db.ExecContext(ctx, q); err == nil {
					t.Errorf("%s succeeded: it must be append-only", q)
				}
			}
		}
		rows, err := store.AuditByOrder(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].Note != "退款重试" || rows[0].Before != "REFUND_FAILED" || rows[0].After != "REFUNDING" {
			t.Fatalf("audit rows: %+v", rows)
		}
	})
}

// TestCanTruncateAudit: the tests' database user is root, which holds DROP
// everywhere; one granted only what serve needs does not.
func TestCanTruncateAudit(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		can, err := store.CanTruncateAudit(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if want := store.Driver() == dao.DriverMySQL; can != want {
			t.Fatalf("CanTruncateAudit = %v, want %v", can, want)
		}
	})
}

// TestAuditGuardNeedsNoDrop pins the limit docs/production.md states: the
// guard's foreign key holds against serve's grants only. A user holding
// DROP (root here) empties admin_audit by switching foreign keys off for
// its session — which is why serve warns that such a user can erase the
// audit trail (CanTruncateAudit).
func TestAuditGuardNeedsNoDrop(t *testing.T) {
	store := daotest.Open(t, dao.DriverMySQL)
	ctx := t.Context()
	if err := store.UpdateSession(ctx, func(ctx context.Context, tx *dao.SessionTx) error {
		return tx.InsertAudit(ctx, model.Audit{Key: "k-0123456789abcdef", Operator: "alice", Action: model.AuditRefundRetry,
			TargetKind: model.TargetRefund, TargetID: "AS-7-x", Note: "kept?"})
	}); err != nil {
		t.Fatal(err)
	}
	conn, err := store.SQL().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "TRUNCATE TABLE admin_audit"); err == nil {
		t.Fatal("TRUNCATE with foreign keys on succeeded: the guard is gone")
	}
	if _, err := conn.ExecContext(ctx, "SET FOREIGN_KEY_CHECKS=0"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "TRUNCATE TABLE admin_audit"); err != nil {
		t.Fatalf("TRUNCATE with foreign keys off, as a user holding DROP: %v (if the guard now holds, say so in docs/production.md and serve's warning)", err)
	}
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM admin_audit").Scan(&n); err != nil || n != 0 {
		t.Fatalf("admin_audit after TRUNCATE: %d rows, %v", n, err)
	}
	if can, err := store.CanTruncateAudit(ctx); err != nil || !can {
		t.Fatalf("CanTruncateAudit for root = %v, %v: serve would not warn", can, err)
	}
}

// An action's states are kept whole up to dao.MaxAuditState characters
// (a reload lists every app in force), and past it cut with a mark.
func TestAuditKeepsLongStates(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		ctx := t.Context()
		var apps []string
		for i := range 12 {
			apps = append(apps, fmt.Sprintf("alipay 2088000000000%03d/2021000000000%03d(商城 %d)", i, i, i))
		}
		whole := strings.Join(apps, ", ")
		if n := utf8.RuneCountInString(whole); n <= 200 || n > dao.MaxAuditState {
			t.Fatalf("%d characters: want more than the old 200 and at most %d", n, dao.MaxAuditState)
		}
		long := strings.Repeat("支", dao.MaxAuditState+10)
		for key, a := range map[string]model.Audit{
			"k-reload-twelve-apps": {Before: whole, After: whole + ", wechatpay 1900000109/wx00000000000000ab"},
			"k-reload-past-limit":  {Before: "", After: long},
		} {
			a.Key, a.Operator, a.Action, a.TargetKind, a.TargetID = key, model.OperatorAdminAPI, model.AuditConfigReload, model.TargetConfig, "PROVIDERS_FILE"
			if err := store.InsertAudit(ctx, a); err != nil {
				t.Fatalf("%s: %v", key, err)
			}
		}
		got, err := store.AuditByKey(ctx, "k-reload-twelve-apps")
		if err != nil || got.Before != whole || !strings.HasSuffix(got.After, "wx00000000000000ab") {
			t.Errorf("twelve apps kept as %q / %q (%v), want both whole", got.Before, got.After, err)
		}
		got, err = store.AuditByKey(ctx, "k-reload-past-limit")
		if err != nil || utf8.RuneCountInString(got.After) != dao.MaxAuditState || !strings.HasSuffix(got.After, "支…") {
			t.Errorf("a state past the limit kept as %d characters ending %q (%v), want %d ending in …",
				utf8.RuneCountInString(got.After), got.After[max(len(got.After)-9, 0):], err, dao.MaxAuditState)
		}
	})
}
