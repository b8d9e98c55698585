package service_test

import (
	"context"
	"testing"
	"time"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/fakealipay"
	"paynotify/model"
	"paynotify/service"
)

// A payment the bill repairs is recorded in the app its trade was opened
// in, not the account's first app (the bill names the seller, never the
// app), so its refund goes through that app, with that app's key: an
// order paid in the mobile app whose notification was lost is recorded
// APPLIED in the mobile app; an order already paid in the web app and paid
// again in the mobile app (its close lost), that notification lost too, is
// owed back and refunded on the mobile app's trade.
func TestReconcileRepairsInTheAttemptsApp(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newAppsRig(t, store)

		lost := newSN("RLOST")
		lostOrder := mustOrder(t, store, lost, "11.00")
		if _, err := r.checkout.StartIn(ctx, rigMember, lost, model.ProviderAlipay, model.PayQR, "mobile", model.Payer{}); err != nil {
			t.Fatal(err)
		}

		twice := newSN("RTWICE")
		twiceOrder := mustOrder(t, store, twice, "13.00")
		if _, err := r.checkout.StartIn(ctx, rigMember, twice, model.ProviderAlipay, model.PayQR, "web", model.Payer{}); err != nil {
			t.Fatal(err)
		}
		r.fake.FailNext(fakealipay.MethodClose, "40004", "ACQ.TRADE_NOT_EXIST", 1)
		second, err := r.checkout.StartIn(ctx, rigMember, twice, model.ProviderAlipay, model.PayQR, "mobile", model.Payer{})
		if err != nil {
			t.Fatal(err)
		}
		if second.App != appMobile || second.AttemptNo != 2 {
			t.Fatalf("second start %+v", second)
		}
		if err := r.fake.Pay(ctx, twice); err != nil {
			t.Fatal(err)
		}
		if got := mustGetOrder(t, store, twice); got.Status != model.OrderPaid {
			t.Fatalf("order %s status %d, want paid by its web trade", twice, got.Status)
		}

		r.fake.LoseNotifications(true)
		for _, no := range []string{lost, second.OutTradeNo} {
			if err := r.fake.Pay(ctx, no); err != nil {
				t.Fatal(err)
			}
		}
		r.fake.LoseNotifications(false)

		tr, _ := r.fake.Trade(lost)
		day := tr.Paid.In(model.Beijing).Format("2006-01-02")
		rec := service.NewBillReconciler(store, billsOf(r.clients[appWeb]), r.payments, quietLog)
		rec.SetClock(func() time.Time { return tr.Paid.Add(24 * time.Hour) })
		rec.Account, rec.Accounts = sellerOne, []string{"", sellerOne}
		run, err := rec.Run(ctx, day)
		if err != nil || run.Counts[model.ReconRepaired] != 2 {
			t.Fatalf("run %+v, %v: want both lost payments repaired", run, err)
		}

		pays := mustPayments(t, store, lostOrder.ID)
		if len(pays) != 1 || pays[0].State != model.PaymentApplied || pays[0].Account != sellerOne || pays[0].App != appMobile {
			t.Fatalf("order %s payments %+v, want one APPLIED in the mobile app", lost, pays)
		}
		var owed model.Payment
		for _, p := range mustPayments(t, store, twiceOrder.ID) {
			if p.State != model.PaymentApplied {
				owed = p
			}
		}
		if owed.State != model.PaymentRefundPending || owed.Account != sellerOne || owed.App != appMobile {
			t.Fatalf("the payment owed back is %+v, want REFUND_PENDING in the mobile app", owed)
		}

		refundAll(t, r.refunds)
		mobile, _ := r.fake.Trade(second.OutTradeNo)
		if len(mobile.Refunds) != 1 || mobile.Refunds[0].AppID != appMobile || !mobile.Refunds[0].Amount.Equal(owed.Amount) {
			t.Fatalf("the mobile trade's refunds: %+v, want one by app %s", mobile.Refunds, appMobile)
		}
		if web, _ := r.fake.Trade(twice); len(web.Refunds) != 0 {
			t.Fatalf("the applied web payment was refunded: %+v", web.Refunds)
		}
		if p, err := store.Payment(ctx, model.ProviderAlipay, owed.TradeNo); err != nil || p.State != model.PaymentRefunded {
			t.Fatalf("owed payment now %+v %v", p, err)
		}
	})
}

// A group transaction records bill-like observations (the seller named,
// no app) in their attempts' apps too, as observeOne does.
func TestGroupApplyRecordsTheAttemptsApp(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		g := newGate(t, store)
		p := service.NewPayments(store)
		first := mustOrder(t, store, newSN("GA-FIRST-"), "1.00")
		var ns []model.Observation
		for range 3 {
			o := mustOrder(t, store, newSN("GA-"), "4.00")
			a := model.PayAttempt{OrderID: o.ID, AttemptNo: 2, Provider: model.ProviderAlipay, Account: sellerOne, App: appMobile,
				OutTradeNo: o.OrderSN + "-2", Method: model.PayQR, Amount: o.PayAmount, NextQueryAt: o.CreateTime, ExpireAt: o.CreateTime}
			if err := store.UpdateOrder(ctx, dao.OrderID(o.ID), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
				_, err := tx.InsertAttempt(ctx, a)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			n := paid(a.OutTradeNo, newSN("T-GA-"), "4.00")
			n.Account = sellerOne
			ns = append(ns, n)
		}
		got, _ := inGroup(t, store, g, p, paid(first.OrderSN, newSN("T-GA-"), "1.00"), ns)
		if service.Groups(p) != 1 {
			t.Fatalf("%d group transactions, want 1", service.Groups(p))
		}
		for i, o := range got {
			if o.err != nil || o.outcome != model.OutcomeApplied || o.pay.Account != sellerOne || o.pay.App != appMobile {
				t.Errorf("observation %d: %s %+v %v, want APPLIED in the mobile app", i, o.outcome, o.pay, o.err)
			}
			if pay, err := store.Payment(ctx, model.ProviderAlipay, ns[i].TradeNo); err != nil || pay.App != appMobile {
				t.Errorf("observation %d recorded %+v %v, want in the mobile app", i, pay, err)
			}
		}
	})
}
