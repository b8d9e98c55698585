package dao

import (
	"context"
	"strings"
	"testing"

	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"paynotify/model"
)

// dryMySQL is a Store whose statements are rendered for MySQL, never run;
// captured receives each statement's SQL.
func dryMySQL(t *testing.T) (*Store, *[]string) {
	t.Helper()
	db, err := gorm.Open(gormmysql.New(gormmysql.Config{DSN: "u@tcp(127.0.0.1:1)/x", SkipInitializeWithVersion: true}),
		&gorm.Config{DryRun: true, SkipDefaultTransaction: true, Logger: logger.Discard, DisableAutomaticPing: true})
	if err != nil {
		t.Fatal(err)
	}
	var captured []string
	capture := func(db *gorm.DB) { captured = append(captured, db.Statement.SQL.String()) }
	for _, err := range []error{
		db.Callback().Query().After("gorm:query").Register("test:capture", capture),
		db.Callback().Update().After("gorm:update").Register("test:capture", capture),
		db.Callback().Create().After("gorm:create").Register("test:capture", capture),
		db.Callback().Raw().After("gorm:raw").Register("test:capture", capture), // insertOrKeep's Exec
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return &Store{db: db, driver: DriverMySQL}, &captured
}

// The SQL that the exactly-once guarantee rests on, pinned: the locking
// reads lock, the compare-and-sets compare, a duplicate payment is no error.
func TestCriticalSQL(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		call func(s *Store)
		want []string
	}{
		{"OrderForUpdateLocks", func(s *Store) { s.orderLocked(ctx, OrderSN("X"), ForUpdate) },
			[]string{"FROM `oms_order` WHERE order_sn = ?", "FOR UPDATE"}},
		{"PaymentForUpdateLocks", func(s *Store) { (&OrderTx{s: s}).PaymentForUpdate(ctx, "alipay", "T") },
			[]string{"FROM `oms_order_payment` WHERE provider = ? AND trade_no = ?", "FOR UPDATE"}},
		{"PlainReadDoesNotLock", func(s *Store) { s.Payment(ctx, "alipay", "T") },
			[]string{"FROM `oms_order_payment`"}},
		{"MarkOrderPaidIsCompareAndSet", func(s *Store) { s.markOrderPaid(ctx, 1, model.PayTypeAlipay, fixedTime) },
			[]string{"UPDATE `oms_order` SET", "WHERE id = ? AND status = ?"}},
		{"CloseOrderIsCompareAndSet", func(s *Store) { s.closeOrder(ctx, 1) },
			[]string{"UPDATE `oms_order` SET", "WHERE id = ? AND status = ?"}},
		{"InsertPaymentKeepsDuplicates", func(s *Store) { s.insertPayment(ctx, testPayment) },
			[]string{"INSERT INTO `oms_order_payment`", "ON DUPLICATE KEY UPDATE `provider`=`provider`"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, captured := dryMySQL(t)
			c.call(s)
			if len(*captured) != 1 {
				t.Fatalf("captured %d statements, want 1: %q", len(*captured), *captured)
			}
			sql := (*captured)[0]
			for _, w := range c.want {
				if !strings.Contains(sql, w) {
					t.Errorf("SQL does not contain %q:\n%q", w, sql)
				}
			}
			if c.name == "PlainReadDoesNotLock" && strings.Contains(sql, "FOR UPDATE") {
				t.Errorf("plain read locks:\n%s", sql)
			}
		})
	}
}
