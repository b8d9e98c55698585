package service_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
)

// recorder keeps the statements a store runs while it is on.
type recorder struct {
	mu   sync.Mutex
	on   bool
	stmt []string
}

func (r *recorder) record(sql string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		r.stmt = append(r.stmt, strings.Join(strings.Fields(sql), " "))
	}
}

// during returns the statements run by fn.
func (r *recorder) during(fn func()) []string {
	r.mu.Lock()
	r.on, r.stmt = true, nil
	r.mu.Unlock()
	fn()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return r.stmt
}

// Every statement Observe runs, pinned, on each path: a changed lock
// strength, a lost compare-and-set or one more round trip fails here.
func TestObserveSQL(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		rec := &recorder{}
		if err := store.Trace(rec.record); err != nil {
			t.Fatal(err)
		}
		// Off: the duplicate's statement pinned below is the database's
		// answer, which the duplicate cache would spare (seen_test.go).
		payments := service.NewPayments(store, service.DuplicateCache(0))
		orders := service.NewOrders(store)
		observe := func(t *testing.T, n model.Observation, want model.Outcome) []string {
			t.Helper()
			return rec.during(func() {
				if _, got, err := payments.Observe(ctx, n); err != nil || got != want {
					t.Fatalf("Observe = %s, %v; want %s", got, err, want)
				}
			})
		}
		p := newPurchase(t, store, orders, "sql-first")
		first := observe(t, p.notification(), model.OutcomeApplied)
		dup := observe(t, p.notification(), model.OutcomeDuplicate)

		o := mustOrder(t, store, newSN("SQL-ATTEMPT-"), "10.00")
		a := model.PayAttempt{OrderID: o.ID, AttemptNo: 2, OutTradeNo: o.OrderSN + "-2", Method: model.PayPage,
			Amount: o.PayAmount, NextQueryAt: o.CreateTime, ExpireAt: o.CreateTime}
		if err := store.UpdateOrder(ctx, dao.OrderID(o.ID), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
			_, err := tx.InsertAttempt(ctx, a)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		byAttempt := observe(t, paid(a.OutTradeNo, newSN("T-SQL-"), "10.00"), model.OutcomeApplied)
		o2 := mustOrder(t, store, newSN("SQL-UNDER-"), "10.00")
		under := observe(t, paid(o2.OrderSN, newSN("T-SQL-"), "0.01"), model.OutcomeRefundPending)

		w := observeSQL[store.Driver()]
		for _, c := range []struct {
			name      string
			got, want []string
		}{
			{"FirstNotice", first, []string{w.lookup, "BEGIN", w.lockBySN, w.insertPayment, markOrderPaid, sellReservation, w.insertEvent, "COMMIT"}},
			{"Duplicate", dup, []string{w.lookup}},
			{"FirstNoticeThroughAttempt", byAttempt, []string{w.lookup, "BEGIN", w.lockByID, w.insertPayment, markAttemptPaid, markOrderPaid, w.insertEvent, "COMMIT"}},
			{"RefundPending", under, []string{w.lookup, "BEGIN", w.lockBySN, w.insertPayment, w.insertEvent, "COMMIT"}},
		} {
			if diff := cmp.Diff(c.want, c.got); diff != "" {
				t.Errorf("%s: statements differ (-want +got):\n%s", c.name, diff)
			}
		}
	})
}

// The statements of Observe, as each driver renders them. SQLite has no
// FOR UPDATE: its transactions take the write lock at BEGIN IMMEDIATE.
const (
	orderSelect     = "SELECT `id`,`order_sn`,`member_id`,`pay_amount`,`status`,`pay_type`,`payment_time`,`total_amount`,`coupon_id`,`coupon_amount`,`integration`,`integration_amount`,`stock_reservation`,`create_time`,`modify_time` FROM `oms_order` WHERE "
	paymentInsert   = "INSERT INTO `oms_order_payment` (`account`,`amount`,`app`,`create_time`,`notify_id`,`order_id`,`out_trade_no`,`paid_at`,`provider`,`reason`,`state`,`trade_no`,`update_time`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) "
	eventInsert     = "INSERT INTO `outbox` (`event_id`,`aggregate_id`,`event_type`,`payload`,`state`,`attempts`,`next_attempt_at`,`last_error`,`create_time`,`sent_time`) VALUES (?,?,?,?,?,?,?,?,?,?)"
	markOrderPaid   = "UPDATE `oms_order` SET `modify_time`=?,`pay_type`=?,`payment_time`=?,`status`=? WHERE id = ? AND status = ?"
	sellReservation = "UPDATE `pms_sku_stock` SET `lock_stock`=lock_stock - CASE id WHEN ? THEN ? END,`modify_time`=?,`stock`=stock - CASE id WHEN ? THEN ? END WHERE id IN (?)"
	markAttemptPaid = "UPDATE `oms_pay_attempt` SET `state`=?,`update_time`=? WHERE out_trade_no = ? AND order_id = ? AND state IN (?,?)"
	tradeLookup     = "SELECT 'p' AS src, order_id, out_trade_no, amount, state, reason, notify_id, paid_at, 0 AS attempt_id, 0 AS attempt_no, provider, account, app FROM oms_order_payment WHERE provider = ? AND trade_no = ? UNION ALL SELECT 'a', order_id, out_trade_no, amount, state, '', '', NULL, id, attempt_no, provider, account, app FROM oms_pay_attempt WHERE out_trade_no = ?"
)

var observeSQL = map[string]struct{ lookup, lockBySN, lockByID, insertPayment, insertEvent string }{
	dao.DriverMySQL: {
		lookup:        tradeLookup,
		lockBySN:      orderSelect + "order_sn = ? LIMIT ? FOR UPDATE",
		lockByID:      orderSelect + "id = ? LIMIT ? FOR UPDATE",
		insertPayment: paymentInsert + "ON DUPLICATE KEY UPDATE `provider`=`provider`",
		insertEvent:   eventInsert,
	},
	dao.DriverSQLite: {
		lookup:        tradeLookup,
		lockBySN:      orderSelect + "order_sn = ? LIMIT 1",
		lockByID:      orderSelect + "id = ? LIMIT 1",
		insertPayment: paymentInsert + "ON CONFLICT (`provider`,`trade_no`) DO NOTHING",
		insertEvent:   eventInsert,
	},
}
