package service_test

import (
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/handler"
	"paynotify/model"
	"paynotify/service"
	"paynotify/service/providertest"
)

// The payment core through the toy, a provider the core was never told
// of beyond the one line that adds it: a payment started, its
// notification applied once however many deliveries race, a second
// trade of the paid order refunded through the toy, an operator's refund
// made once, and the day reconciled against the toy's bill (a payment
// whose notification was lost found there and applied).
func TestToyPaymentCore(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		fake, toy := newToy(t)
		providers := service.Providers{}
		if err := providers.Add(toy); err != nil { // the one line
			t.Fatal(err)
		}
		payments := service.NewPayments(store)
		checkout := service.NewCheckout(store, providers, payments, nil, quietLog)
		refunds := service.NewRefunds(store, providers, quietLog)
		ten := decimal.RequireFromString("10.00")

		// Pay: checkout opens the trade at the toy.
		sn := "TOY-1" // each database is the test's own
		o := mustOrder(t, store, sn, "10.00")
		view, err := checkout.Start(ctx, 7, sn, toySpec.Name, model.PayQR)
		if err != nil || view.Provider != string(toySpec.Name) || view.OutTradeNo != sn || view.QRCode == "" {
			t.Fatalf("Start = %+v, %v; want the toy's trade %s", view, err, sn)
		}
		if tr, err := toy.QueryTrade(ctx, sn); err != nil || tr.Status != model.TradeOpen {
			t.Fatalf("the toy's trade once started: %+v, %v", tr, err)
		}

		// Notify: eight deliveries of one notification race; one applies.
		if err := fake.Pay(ctx, sn); err != nil {
			t.Fatal(err)
		}
		first := notice(t, fake, toy, sn)
		var mu sync.Mutex
		outcomes := map[model.Outcome]int{}
		startAll(8, func(int) {
			_, outcome, err := payments.Observe(ctx, first)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
			}
			outcomes[outcome]++
		})
		if outcomes[model.OutcomeApplied] != 1 || outcomes[model.OutcomeDuplicate] != 7 {
			t.Fatalf("outcomes %v; want one applied, seven duplicates", outcomes)
		}
		appliedOnce(t, store, sn, o.ID)

		// A second trade of the paid order: owed back, refunded through
		// the toy, once.
		attempt(t, store, o, 2, toySpec.Name)
		second := sn + "-2"
		if _, err := toy.StartPayment(ctx, model.PayStart{OutTradeNo: second, Amount: ten, Method: model.PayQR, ExpireAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := fake.Pay(ctx, second); err != nil {
			t.Fatal(err)
		}
		again := notice(t, fake, toy, second)
		if pay, outcome, err := payments.Observe(ctx, again); err != nil || outcome != model.OutcomeRefundPending || pay.Reason != model.RefundAlreadyPaid {
			t.Fatalf("the second trade: %+v %s %v; want owed back as already paid", pay, outcome, err)
		}
		refundAll(t, refunds)
		if sum, n := fake.refunded(again.TradeNo); !sum.Equal(ten) || n != 1 {
			t.Fatalf("the toy refunded %s of the second trade under %d request numbers; want 10.00 under one", sum, n)
		}

		// An operator's refund, asked twice with one key: made once.
		three := decimal.RequireFromString("3.00")
		for range 2 {
			if _, err := refunds.Request(ctx, sn, "toy-after-sale", three, "toy test"); err != nil {
				t.Fatal(err)
			}
			refundAll(t, refunds)
		}
		if sum, n := fake.refunded(first.TradeNo); !sum.Equal(three) || n != 1 {
			t.Fatalf("the toy refunded %s of the applied trade under %d request numbers; want 3.00 under one", sum, n)
		}

		// A payment whose notification was lost: the day's bill finds it.
		lost := "TOY-LOST"
		lo := mustOrder(t, store, lost, "10.00")
		if _, err := checkout.Start(ctx, 7, lost, toySpec.Name, model.PayQR); err != nil {
			t.Fatal(err)
		}
		if err := fake.Pay(ctx, lost); err != nil {
			t.Fatal(err)
		}
		r := service.NewBillReconciler(store, toy, payments, quietLog)
		r.Provider = toySpec.Name
		r.Grace = 0
		r.SetClock(func() time.Time { return time.Now().Add(24 * time.Hour) }) // today is yesterday
		tr, err := toy.QueryTrade(ctx, lost)
		if err != nil || tr.PaidAt == nil {
			t.Fatalf("the lost payment at the toy: %+v, %v", tr, err)
		}
		date := tr.PaidAt.In(model.Beijing).Format(time.DateOnly) // its day, should midnight fall mid-test
		run, err := r.Run(ctx, date)
		if err != nil || run.State != model.ReconDone {
			t.Fatalf("run of %s: %+v, %v", date, run, err)
		}
		if run.Counts[model.ReconRepaired] != 1 || run.Unresolved != 0 {
			t.Fatalf("run of %s: counts %v, %d unresolved; want the lost payment repaired, nothing else", date, run.Counts, run.Unresolved)
		}
		appliedOnce(t, store, lost, lo.ID)
	})
}

// The toy's notification reaches the service over HTTP with no more
// wiring than the line that adds it: serve mounts every provider whose
// adapter is a handler.Notifier at POST /notify/{provider} (app.go's
// newRoutes), as here; the toy posts as it pays, and the payment applies.
func TestToyNotifiesOverHTTP(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		fake, toy := newToy(t)
		providers := service.Providers{}
		if err := providers.Add(toy); err != nil { // the one line
			t.Fatal(err)
		}
		payments := service.NewPayments(store)
		notifiers := map[model.Provider]handler.Notifier{}
		for p, gw := range providers {
			if nf, ok := gw.(handler.Notifier); ok {
				notifiers[p] = nf
			}
		}
		srv := httptest.NewServer(handler.New(handler.Deps{Log: quietLog, Payments: payments, DB: store,
			Registry: prometheus.NewRegistry(), Notifiers: notifiers}))
		t.Cleanup(srv.Close)
		toy.notifyURL = srv.URL + "/notify/" + string(toySpec.Name)

		o := mustOrder(t, store, "TOY-HTTP", "10.00")
		if _, err := service.NewCheckout(store, providers, payments, nil, quietLog).Start(ctx, 7, "TOY-HTTP", toySpec.Name, model.PayQR); err != nil {
			t.Fatal(err)
		}
		if err := fake.Pay(ctx, "TOY-HTTP"); err != nil { // answered OK, or an error
			t.Fatal(err)
		}
		appliedOnce(t, store, "TOY-HTTP", o.ID)
	})
}

// appliedOnce fails t unless order sn (id) is paid through the toy by
// its one payment, APPLIED.
func appliedOnce(t *testing.T, store *dao.Store, sn string, id int64) {
	t.Helper()
	o, ps := mustGetOrder(t, store, sn), mustPayments(t, store, id)
	if o.Status != model.OrderPaid || o.PayType != toySpec.PayType || len(ps) != 1 || ps[0].State != model.PaymentApplied || ps[0].Provider != toySpec.Name {
		t.Fatalf("%s: status %d, pay_type %d, payments %+v; want paid through the toy (pay_type %d) by one APPLIED payment",
			sn, o.Status, o.PayType, ps, toySpec.PayType)
	}
}

// notice is the toy's genuine notification of outTradeNo's payment, as
// its adapter reads it.
func notice(t *testing.T, fake *toyFake, toy *toyPay, outTradeNo string) model.Observation {
	t.Helper()
	h, body, err := fake.Notice(ctx, outTradeNo, providertest.Genuine)
	if err != nil {
		t.Fatal(err)
	}
	n, err := toy.Notice(ctx, h, body)
	if err != nil {
		t.Fatal(err)
	}
	return n.Payment
}
