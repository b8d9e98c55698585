package service_test

import (
	"errors"
	"testing"

	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
)

// A duplicate of a trade this instance saw committed is answered from
// memory — no statement at all — only if it names the same out_trade_no,
// amount, app and status; a notification that differs in any of them goes
// to the database, which decides (a conflict for another order or amount).
func TestDuplicateCacheAnswersOnlyTheSame(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		rec := &recorder{}
		if err := store.Trace(rec.record); err != nil {
			t.Fatal(err)
		}
		p := service.NewPayments(store, service.DuplicateCache(100))
		other := mustOrder(t, store, newSN("DC-OTHER-"), "10.00")
		for _, tc := range []struct {
			name    string
			change  func(n *model.Observation)
			memory  bool // answered without a statement
			outcome model.Outcome
			err     error
		}{
			{"Same", func(*model.Observation) {}, true, model.OutcomeDuplicate, nil},
			{"SameButRef", func(n *model.Observation) { n.Ref = "another-notify-id" }, true, model.OutcomeDuplicate, nil},
			{"Amount", func(n *model.Observation) { n.Amount = decimal.RequireFromString("10.01") }, false, "", model.ErrTradeConflict},
			{"OutTradeNo", func(n *model.Observation) { n.OutTradeNo = other.OrderSN }, false, "", model.ErrTradeConflict},
			{"App", func(n *model.Observation) { n.App = "2021000000000002" }, false, model.OutcomeDuplicate, nil},
			{"Status", func(n *model.Observation) { n.Status = string(alipay.TradeFinished) }, false, model.OutcomeDuplicate, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				o := mustOrder(t, store, newSN("DC-"), "10.00")
				n := paid(o.OrderSN, "T-"+o.OrderSN, "10.00")
				n.App, n.Status = "2021000000000001", string(alipay.TradeSuccess)
				if _, outcome, err := p.Observe(ctx, n); err != nil || outcome != model.OutcomeApplied {
					t.Fatalf("first notice: %s %v", outcome, err)
				}
				again := n
				tc.change(&again)
				var (
					outcome model.Outcome
					err     error
				)
				stmts := rec.during(func() { _, outcome, err = p.Observe(ctx, again) })
				if outcome != tc.outcome || !errors.Is(err, tc.err) {
					t.Errorf("answered %q %v, want %q %v", outcome, err, tc.outcome, tc.err)
				}
				if memory := len(stmts) == 0; memory != tc.memory {
					t.Errorf("answered from memory: %v, want %v (statements %q)", memory, tc.memory, stmts)
				}
			})
		}
	})
}

// A notification whose transaction rolled back is not remembered: sent
// again, it goes to the database and is applied there, once.
func TestDuplicateCacheForgetsRollback(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		rec := &recorder{}
		if err := store.Trace(rec.record); err != nil {
			t.Fatal(err)
		}
		p := service.NewPayments(store, service.DuplicateCache(100))
		o := mustOrder(t, store, newSN("DC-RB-"), "10.00")
		n := paid(o.OrderSN, "T-"+o.OrderSN, "10.00")
		// Every outbox insert fails: the payment's transaction, which
		// inserted the payment first, rolls back at its last statement.
		fail := map[string]string{
			dao.DriverMySQL:  "CREATE TRIGGER dc_fail BEFORE INSERT ON outbox FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'rolled back by the test'",
			dao.DriverSQLite: "CREATE TRIGGER dc_fail BEFORE INSERT ON outbox BEGIN SELECT RAISE(ABORT, 'rolled back by the test'); END",
		}[store.Driver()]
		if _, err := store.SQL().ExecContext(ctx, fail); err != nil {
			t.Fatal(err)
		}
		if _, outcome, err := p.Observe(ctx, n); err == nil {
			t.Fatalf("with the outbox failing: %s, want an error", outcome)
		}
		if _, err := store.SQL().ExecContext(ctx, "DROP TRIGGER dc_fail"); err != nil {
			t.Fatal(err)
		}
		var (
			outcome model.Outcome
			err     error
		)
		stmts := rec.during(func() { _, outcome, err = p.Observe(ctx, n) })
		if err != nil || outcome != model.OutcomeApplied {
			t.Fatalf("sent again: %s %v, want applied", outcome, err)
		}
		if len(stmts) == 0 {
			t.Error("sent again, it was answered from memory")
		}
		stmts = rec.during(func() { _, outcome, err = p.Observe(ctx, n) })
		if err != nil || outcome != model.OutcomeDuplicate || len(stmts) != 0 {
			t.Errorf("third time: %s %v after %d statements, want a duplicate from memory", outcome, err, len(stmts))
		}
	})
}
