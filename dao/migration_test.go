package dao_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/migrations"
)

// TestMigrationOutcomesNameNoProvider: 00013 renames the items recorded
// under Alipay's names to the provider-neutral ones, and back.
func TestMigrationOutcomesNameNoProvider(t *testing.T) {
	ctx := context.Background()
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		db := store.SQL()
		if err := migrations.DownTo(ctx, db, store.Driver(), 12); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO recon_run (provider, bill_date, state) VALUES ('alipay', '2026-11-30', 'DONE')`); err != nil {
			t.Fatal(err)
		}
		for _, o := range []string{"MISSING_AT_ALIPAY", "REFUND_MISSING_AT_ALIPAY", "AMOUNT_DIFFERS"} {
			if _, err := db.Exec(`INSERT INTO recon_item (run_id, attempt_no, outcome, ref) VALUES (1, 1, ?, 'R')`, o); err != nil {
				t.Fatal(err)
			}
		}
		outcomes := func() []string {
			t.Helper()
			return queryStrings(t, db, `SELECT outcome FROM recon_item ORDER BY id`)
		}
		if err := store.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"MISSING_AT_PROVIDER", "REFUND_MISSING_AT_PROVIDER", "AMOUNT_DIFFERS"}, outcomes()); diff != "" {
			t.Errorf("after 00013 (-want +got):\n%s", diff)
		}
		if err := migrations.DownTo(ctx, db, store.Driver(), 12); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"MISSING_AT_ALIPAY", "REFUND_MISSING_AT_ALIPAY", "AMOUNT_DIFFERS"}, outcomes()); diff != "" {
			t.Errorf("after 00013 down (-want +got):\n%s", diff)
		}
	})
}

// TestMigrationAppliedOutOfOrder: a database migrated before 00009 landed,
// but after a later number, gets 00009 from the next migrate instead of a
// refusal.
func TestMigrationAppliedOutOfOrder(t *testing.T) {
	ctx := context.Background()
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		db := store.SQL()
		if _, err := db.Exec(`DROP TABLE admin_audit_guard`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`DELETE FROM goose_db_version WHERE version_id = 9`); err != nil {
			t.Fatal(err)
		}
		if pending, err := store.MigrationsPending(ctx); err != nil || !pending {
			t.Fatalf("pending = %v, %v; want 00009 pending", pending, err)
		}
		if err := store.Migrate(ctx); err != nil {
			t.Fatalf("migrate with 00009 missing: %v", err)
		}
		if n := queryStrings(t, db, `SELECT COUNT(*) FROM admin_audit_guard`); len(n) != 1 {
			t.Fatalf("admin_audit_guard after migrate: %v", n)
		}
	})
}
