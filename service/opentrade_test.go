package service_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/fakealipay"
	"paynotify/model"
	"paynotify/service"
)

// lostNotification is the index, in the fake's Notifications, of the
// lost notification about outTradeNo.
func lostNotification(t *testing.T, fake *fakealipay.Server, outTradeNo string) int {
	t.Helper()
	for i, n := range fake.Notifications() {
		if n.Outcome == fakealipay.Lost && n.Form.Get("out_trade_no") == outTradeNo {
			return i
		}
	}
	t.Fatalf("no lost notification about %s", outTradeNo)
	return -1
}

// payLost is the buyer paying outTradeNo while Alipay's notification is
// lost on the way.
func payLost(t *testing.T, fake *fakealipay.Server, outTradeNo string) {
	t.Helper()
	fake.LoseNotifications(true)
	err := fake.Pay(ctx, outTradeNo)
	fake.LoseNotifications(false)
	if err != nil {
		t.Fatalf("pay %s: %v", outTradeNo, err)
	}
}

// queryNow makes an attempt's next query due now.
func queryNow(t *testing.T, store *dao.Store, a model.PayAttempt) {
	t.Helper()
	if err := store.ScheduleQuery(ctx, a.ID, time.Now()); err != nil {
		t.Fatalf("schedule query: %v", err)
	}
}

// The query job finds what a lost notification would have said, through
// the notification's own path; Alipay's retry of that notification then
// changes nothing.
func TestQueryDue(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newRig(t, store)
		c := r.checkout(redisLocker(t))

		t.Run("LostNotification", func(t *testing.T) {
			o := mustOrder(t, store, newSN("LN"), "100.00")
			v := mustStart(t, c, o.OrderSN, model.PayPage)
			openPayURL(t, v.PayURL)
			payLost(t, r.fake, o.OrderSN)
			if got := mustGetOrder(t, store, o.OrderSN); got.Status != model.OrderAwaitingPayment {
				t.Fatalf("order %s before any query, want AWAITING_PAYMENT", got.Status)
			}

			// Not due yet: the first query waits minutes for the notification.
			a := mustAttempt(t, store, o.OrderSN)
			if until := time.Until(a.NextQueryAt); until < time.Minute {
				t.Fatalf("first query due in %v, want minutes", until)
			}
			queries := r.fake.Calls(fakealipay.MethodQuery)
			if n, err := r.recon.QueryDue(ctx); err != nil || n != 0 || r.fake.Calls(fakealipay.MethodQuery) != queries {
				t.Fatalf("QueryDue before due = %d, %v (%d queries), want nothing asked", n, err, r.fake.Calls(fakealipay.MethodQuery)-queries)
			}

			queryNow(t, store, a)
			if n, err := r.recon.QueryDue(ctx); err != nil || n != 1 {
				t.Fatalf("QueryDue = %d, %v; want 1 paid", n, err)
			}
			checkPaidOnce := func(t *testing.T) {
				t.Helper()
				if got := mustGetOrder(t, store, o.OrderSN); got.Status != model.OrderPaid || got.PaymentTime == nil {
					t.Fatalf("order %+v, want PAID with a payment time", got)
				}
				ps := mustPayments(t, store, o.ID)
				if len(ps) != 1 || ps[0].State != model.PaymentApplied || ps[0].TradeNo != mustTrade(t, r.fake, o.OrderSN).TradeNo {
					t.Fatalf("payments %+v, want one APPLIED for the trade", ps)
				}
				if a := mustAttempt(t, store, o.OrderSN); a.State != model.AttemptPaid {
					t.Fatalf("attempt %s, want PAID", a.State)
				}
				if n := eventCount(t, store, o.ID, model.EventOrderPaid); n != 1 {
					t.Fatalf("%d order.paid events, want 1", n)
				}
			}
			checkPaidOnce(t)

			// Alipay resends the notification it lost: acknowledged, no change.
			if err := r.fake.Resend(ctx, lostNotification(t, r.fake, o.OrderSN)); err != nil {
				t.Fatalf("resend: %v", err)
			}
			checkPaidOnce(t)
			if n, err := r.recon.QueryDue(ctx); err != nil || n != 0 {
				t.Fatalf("QueryDue after paid = %d, %v; want nothing", n, err)
			}
		})

		// Unpaid, never opened, or closed by Alipay: nothing is applied; the
		// open ones are asked again later, the closed one is closed here too.
		cases := []struct {
			name      string
			setup     func(t *testing.T, v service.PayView)
			wantState model.AttemptState
		}{
			{name: "WaitingForBuyer", wantState: model.AttemptOpen,
				setup: func(t *testing.T, v service.PayView) { openPayURL(t, v.PayURL) }},
			{name: "NeverOpened", wantState: model.AttemptOpen,
				setup: func(t *testing.T, v service.PayView) {}},
			{name: "ClosedAtAlipay", wantState: model.AttemptClosed,
				setup: func(t *testing.T, v service.PayView) {
					openPayURL(t, v.PayURL)
					if err := r.gw.CloseTrade(ctx, v.OutTradeNo); err != nil {
						t.Fatal(err)
					}
				}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				o := mustOrder(t, store, newSN("QD"), "10.00")
				v := mustStart(t, c, o.OrderSN, model.PayPage)
				tc.setup(t, v)
				queryNow(t, store, mustAttempt(t, store, o.OrderSN))
				if n, err := r.recon.QueryDue(ctx); err != nil || n != 0 {
					t.Fatalf("QueryDue = %d, %v; want none paid", n, err)
				}
				a := mustAttempt(t, store, o.OrderSN)
				if a.State != tc.wantState || a.Queries != 1 {
					t.Fatalf("attempt %s after %d queries, want %s after 1", a.State, a.Queries, tc.wantState)
				}
				if a.State == model.AttemptOpen && time.Until(a.NextQueryAt) < 30*time.Second {
					t.Fatalf("asked again in %v, want a back-off", time.Until(a.NextQueryAt))
				}
				if got := mustGetOrder(t, store, o.OrderSN); got.Status != model.OrderAwaitingPayment || len(mustPayments(t, store, o.ID)) != 0 {
					t.Fatalf("order %s with payments, want untouched", got.Status)
				}
			})
		}
	})
}

// checkRefundedOnce asserts that the order's one payment, of amount, went
// back exactly once: one refund at Alipay, the payment REFUNDED, one
// payment.refunded event.
func checkRefundedOnce(t *testing.T, r *rig, o model.Order, outTradeNo, amount string) {
	t.Helper()
	tr := mustTrade(t, r.fake, outTradeNo)
	if len(tr.Refunds) != 1 || tr.Refunded().StringFixed(2) != amount {
		t.Fatalf("Alipay holds refunds %+v of %s, want one of %s", tr.Refunds, outTradeNo, amount)
	}
	ps := mustPayments(t, r.store, o.ID)
	if len(ps) != 1 || ps[0].State != model.PaymentRefunded {
		t.Fatalf("payments %+v, want one REFUNDED", ps)
	}
	if n := eventCount(t, r.store, o.ID, model.EventRefunded); n != 1 {
		t.Fatalf("%d payment.refunded events, want 1", n)
	}
	if got := mustGetOrder(t, r.store, o.OrderSN); got.Status != model.OrderClosed {
		t.Fatalf("order %s, want it to stay CLOSED", got.Status)
	}
}

// The buyer pays a trade whose order was cancelled meanwhile: closing the
// trade at Alipay is refused (paid), the query finds the payment, it is
// owed back, and the refund worker gives it back once.
func TestCloseAbandoned(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newRig(t, store)
		c := r.checkout(redisLocker(t))

		t.Run("PaidAfterCancel", func(t *testing.T) {
			o := mustOrder(t, store, newSN("PC"), "100.00")
			v := mustStart(t, c, o.OrderSN, model.PayPage)
			openPayURL(t, v.PayURL)
			if _, err := r.orders.Cancel(ctx, rigMember, o.OrderSN); err != nil {
				t.Fatalf("cancel: %v", err)
			}
			payLost(t, r.fake, o.OrderSN)

			closes := r.fake.Calls(fakealipay.MethodClose)
			if n, err := r.recon.CloseAbandoned(ctx); err != nil || n != 0 {
				t.Fatalf("CloseAbandoned = %d, %v; want nothing closed", n, err)
			}
			if got := r.fake.Calls(fakealipay.MethodClose) - closes; got != 1 {
				t.Fatalf("%d close calls, want 1", got)
			}
			ps := mustPayments(t, store, o.ID)
			if len(ps) != 1 || ps[0].State != model.PaymentRefundPending || ps[0].Reason != model.RefundOrderClosed {
				t.Fatalf("payments %+v, want one REFUND_PENDING ORDER_CLOSED", ps)
			}
			if got := mustGetOrder(t, store, o.OrderSN); got.Status != model.OrderClosed {
				t.Fatalf("order %s, want it to stay CLOSED", got.Status)
			}
			if a := mustAttempt(t, store, o.OrderSN); a.State != model.AttemptPaid {
				t.Fatalf("attempt %s, want PAID", a.State)
			}
			if n := eventCount(t, store, o.ID, model.EventRefundPending); n != 1 {
				t.Fatalf("%d payment.refund_pending events, want 1", n)
			}
			// Nothing is left to close.
			if _, err := r.recon.CloseAbandoned(ctx); err != nil || r.fake.Calls(fakealipay.MethodClose)-closes != 1 {
				t.Fatalf("second CloseAbandoned: %v, %d close calls", err, r.fake.Calls(fakealipay.MethodClose)-closes)
			}

			if n, err := r.refunds.Enqueue(ctx); err != nil || n != 1 {
				t.Fatalf("Enqueue = %d, %v; want 1", n, err)
			}
			if n, err := r.refunds.Execute(ctx); err != nil || n != 1 {
				t.Fatalf("Execute = %d, %v; want 1", n, err)
			}
			r.fake.WaitNotifications() // the refund notification, through the handler
			checkRefundedOnce(t, r, o, o.OrderSN, "100.00")
			if tr := mustTrade(t, r.fake, o.OrderSN); tr.Status != alipay.TradeClosed {
				t.Fatalf("trade %s after a full refund, want TRADE_CLOSED", tr.Status)
			}
			refunds := r.fake.Calls(fakealipay.MethodRefund)
			if n, err := r.refunds.Enqueue(ctx); err != nil || n != 0 {
				t.Fatalf("Enqueue again = %d, %v; want 0", n, err)
			}
			if n, err := r.refunds.Execute(ctx); err != nil || n != 0 || r.fake.Calls(fakealipay.MethodRefund) != refunds {
				t.Fatalf("Execute again = %d, %v; want nothing asked", n, err)
			}
		})

		cases := []struct {
			name      string
			open      bool
			wantTrade bool
		}{
			{name: "NeverOpened"},
			{name: "Unpaid", open: true, wantTrade: true},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				o := mustOrder(t, store, newSN("CA"), "10.00")
				v := mustStart(t, c, o.OrderSN, model.PayPage)
				if tc.open {
					openPayURL(t, v.PayURL)
				}
				if _, err := r.orders.Cancel(ctx, rigMember, o.OrderSN); err != nil {
					t.Fatalf("cancel: %v", err)
				}
				if n, err := r.recon.CloseAbandoned(ctx); err != nil || n != 1 {
					t.Fatalf("CloseAbandoned = %d, %v; want 1 closed", n, err)
				}
				if a := mustAttempt(t, store, o.OrderSN); a.State != model.AttemptClosed {
					t.Fatalf("attempt %s, want CLOSED", a.State)
				}
				tr, ok := r.fake.Trade(o.OrderSN)
				if ok != tc.wantTrade || (ok && tr.Status != alipay.TradeClosed) {
					t.Fatalf("trade at Alipay: %v %s", ok, tr.Status)
				}
				if len(mustPayments(t, store, o.ID)) != 0 {
					t.Fatal("a payment appeared")
				}
			})
		}

		// Cancels racing the buyer, notifications delivered: each order
		// ends paid (the cancel refused) or closed with its money back once,
		// and both happen.
		t.Run("CancelRacesPay", func(t *testing.T) {
			raceBothWays(t, "paid first", "cancelled first and refunded", func(t *testing.T, round int) (paidN, refundedN int) {
				const n = 8
				type pair struct {
					o                 model.Order
					cancelErr, payErr error
				}
				ps := make([]pair, n)
				for i := range ps {
					ps[i].o = mustOrder(t, store, newSN("CR"), "20.00")
					openPayURL(t, mustStart(t, c, ps[i].o.OrderSN, model.PayPage).PayURL)
				}
				startAll(2*n, func(i int) {
					p := &ps[i/2]
					if i%2 == 0 {
						// From the second round on, the pairs' cancels set
						// off further and further behind their payments
						// (0 to 7×round ms): on a loaded machine the buyer's
						// payment, an HTTP round trip and a notification,
						// otherwise never arrives first.
						time.Sleep(time.Duration(i/2*round) * time.Millisecond)
						_, p.cancelErr = r.orders.Cancel(ctx, rigMember, p.o.OrderSN)
					} else {
						p.payErr = r.fake.Pay(ctx, p.o.OrderSN)
					}
				})
				if _, err := r.recon.CloseAbandoned(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := r.refunds.Enqueue(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := r.refunds.Execute(ctx); err != nil {
					t.Fatal(err)
				}
				r.fake.WaitNotifications()
				for _, p := range ps {
					if p.payErr != nil {
						t.Fatalf("%s: pay: %v", p.o.OrderSN, p.payErr)
					}
					switch got := mustGetOrder(t, store, p.o.OrderSN); got.Status {
					case model.OrderPaid:
						paidN++
						if !errors.Is(p.cancelErr, model.ErrOrderNotCancellable) {
							t.Fatalf("%s paid, but the cancel answered %v", p.o.OrderSN, p.cancelErr)
						}
						pays := mustPayments(t, store, p.o.ID)
						if len(pays) != 1 || pays[0].State != model.PaymentApplied || len(mustTrade(t, r.fake, p.o.OrderSN).Refunds) != 0 {
							t.Fatalf("%s paid with payments %+v", p.o.OrderSN, pays)
						}
					case model.OrderClosed:
						refundedN++
						if p.cancelErr != nil {
							t.Fatalf("%s closed, but the cancel answered %v", p.o.OrderSN, p.cancelErr)
						}
						checkRefundedOnce(t, r, p.o, p.o.OrderSN, "20.00")
					default:
						t.Fatalf("%s ended %s", p.o.OrderSN, got.Status)
					}
				}
				return paidN, refundedN
			})
		})
	})
}

// Two instances (two pools on one database) running the open-trade jobs
// at once: each due attempt is queried once and each lost payment applied
// once; abandoned trades end closed, or paid ones owed back once.
func TestOpenTradesInTwoInstances(t *testing.T) {
	for _, driver := range daotest.Drivers {
		t.Run(driver, func(t *testing.T) {
			a, b := openTwice(t, driver)
			r := newRig(t, a)
			c := r.checkout(nil)
			trades := make([]*service.OpenTrades, 2)
			for i, store := range []*dao.Store{a, b} {
				trades[i] = service.NewOpenTrades(store, r.providers(), service.NewPayments(store), quietLog)
				trades[i].Batch = 4
			}

			t.Run("QueryDue", func(t *testing.T) {
				const n = 16
				orders := make([]model.Order, n)
				for i := range orders {
					orders[i] = mustOrder(t, a, newSN("QT"), "10.00")
					openPayURL(t, mustStart(t, c, orders[i].OrderSN, model.PayPage).PayURL)
					payLost(t, r.fake, orders[i].OrderSN)
					queryNow(t, a, mustAttempt(t, a, orders[i].OrderSN))
				}
				queries := r.fake.Calls(fakealipay.MethodQuery)
				paid := make([]int, 2)
				errs := make([]error, 2)
				startAll(2, func(i int) {
					for {
						k, err := trades[i].QueryDue(ctx)
						paid[i] += k
						if err != nil || k == 0 {
							errs[i] = err
							return
						}
					}
				})
				for i, err := range errs {
					if err != nil {
						t.Fatalf("open trades %d: %v", i, err)
					}
				}
				if got := r.fake.Calls(fakealipay.MethodQuery) - queries; got != n || paid[0]+paid[1] != n {
					t.Fatalf("%d queries, %v found paid; want each of %d attempts queried once", got, paid, n)
				}
				for _, o := range orders {
					if got := mustGetOrder(t, a, o.OrderSN); got.Status != model.OrderPaid {
						t.Fatalf("%s is %s, want PAID", o.OrderSN, got.Status)
					}
					if ps := mustPayments(t, a, o.ID); len(ps) != 1 || eventCount(t, a, o.ID, model.EventOrderPaid) != 1 {
						t.Fatalf("%s: payments %+v, want one applied once", o.OrderSN, ps)
					}
				}
			})

			t.Run("CloseAbandoned", func(t *testing.T) {
				const n = 12
				orders := make([]model.Order, n)
				for i := range orders {
					orders[i] = mustOrder(t, a, newSN("CT"), "10.00")
					openPayURL(t, mustStart(t, c, orders[i].OrderSN, model.PayPage).PayURL)
					if _, err := r.orders.Cancel(ctx, rigMember, orders[i].OrderSN); err != nil {
						t.Fatalf("cancel: %v", err)
					}
					if i%2 == 1 { // the buyer paid anyway
						payLost(t, r.fake, orders[i].OrderSN)
					}
				}
				errs := make([]error, 2)
				startAll(2, func(i int) { errs[i] = closeAbandonedUntilNone(trades[i], a) })
				for i, err := range errs {
					if err != nil {
						t.Fatalf("open trades %d: %v", i, err)
					}
				}
				for i, o := range orders {
					ps := mustPayments(t, a, o.ID)
					tr := mustTrade(t, r.fake, o.OrderSN)
					att := mustAttempt(t, a, o.OrderSN)
					if i%2 == 0 {
						if tr.Status != alipay.TradeClosed || att.State != model.AttemptClosed || len(ps) != 0 {
							t.Fatalf("%s: trade %s, attempt %s, payments %+v; want closed, nothing paid", o.OrderSN, tr.Status, att.State, ps)
						}
						continue
					}
					if att.State != model.AttemptPaid || len(ps) != 1 || ps[0].State != model.PaymentRefundPending ||
						eventCount(t, a, o.ID, model.EventRefundPending) != 1 {
						t.Fatalf("%s: attempt %s, payments %+v; want one REFUND_PENDING, announced once", o.OrderSN, att.State, ps)
					}
				}
			})
		})
	}
}

// closeAbandonedUntilNone runs rounds of CloseAbandoned, as RunJobs does, until
// no closed order has an open attempt, up to a deadline.
func closeAbandonedUntilNone(rec *service.OpenTrades, store *dao.Store) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := rec.CloseAbandoned(ctx); err != nil && !errors.Is(err, model.ErrRetryable) {
			return err
		}
		var left int
		err := store.SQL().QueryRowContext(ctx,
			"SELECT COUNT(*) FROM oms_pay_attempt a JOIN oms_order o ON o.id = a.order_id WHERE a.state = ? AND o.status = ?",
			model.AttemptOpen, model.OrderClosed).Scan(&left)
		if err != nil || left == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d open attempts of closed orders left at the deadline", left)
		}
	}
}

// A page trade that Alipay did not know yet when the buyer switched to a
// QR code (closing it answered TRADE_NOT_EXIST) can still be opened and
// paid from the old URL. That payment pays the order through the closed
// attempt — told by its notification, or found by the query job, which
// keeps asking about closed attempts until their trades expire — and the
// QR trade left open on the paid order is closed, so nobody pays twice.
func TestPaidThroughAnEarlierAttempt(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newRig(t, store)
		c := r.checkout(nil)
		for _, lost := range []bool{false, true} {
			name := "Notified"
			if lost {
				name = "NotificationLost"
			}
			t.Run(name, func(t *testing.T) {
				o := mustOrder(t, store, newSN("EA"), "10.00")
				page := mustStart(t, c, o.OrderSN, model.PayPage)
				qr := mustStart(t, c, o.OrderSN, model.PayQR)
				if a := mustAttempt(t, store, o.OrderSN); a.State != model.AttemptClosed {
					t.Fatalf("attempt 1 is %s after the switch, want CLOSED", a.State)
				}

				openPayURL(t, page.PayURL) // the old tab
				if lost {
					payLost(t, r.fake, o.OrderSN)
					queryNow(t, store, mustAttempt(t, store, o.OrderSN))
					if n, err := r.recon.QueryDue(ctx); err != nil || n != 1 {
						t.Fatalf("QueryDue = %d, %v; want the payment found", n, err)
					}
				} else if err := r.fake.Pay(ctx, o.OrderSN); err != nil {
					t.Fatal(err)
				}
				if got := mustGetOrder(t, store, o.OrderSN); got.Status != model.OrderPaid {
					t.Fatalf("order %s, want PAID", got.Status)
				}
				if a := mustAttempt(t, store, o.OrderSN); a.State != model.AttemptPaid {
					t.Fatalf("attempt 1 is %s after money moved on it, want PAID", a.State)
				}

				if n, err := r.recon.CloseAbandoned(ctx); err != nil || n != 1 {
					t.Fatalf("CloseAbandoned = %d, %v; want the QR trade closed", n, err)
				}
				if tr := mustTrade(t, r.fake, qr.OutTradeNo); tr.Status != alipay.TradeClosed {
					t.Fatalf("QR trade %s at Alipay, want TRADE_CLOSED", tr.Status)
				}
				if a := mustAttempt(t, store, qr.OutTradeNo); a.State != model.AttemptClosed {
					t.Fatalf("attempt 2 is %s, want CLOSED", a.State)
				}
				if err := r.fake.Pay(ctx, qr.OutTradeNo); !errors.Is(err, fakealipay.ErrTradeStatus) {
					t.Fatalf("paying the closed QR trade = %v, want it refused", err)
				}
				if ps := mustPayments(t, store, o.ID); len(ps) != 1 || ps[0].State != model.PaymentApplied {
					t.Fatalf("payments %+v, want one APPLIED", ps)
				}
			})
		}
	})
}

// A closed attempt — closed perhaps before its buyer ever opened the page —
// is still asked about until its trade's time_expire, however long the
// back-off grows, and retired (EXPIRED) by the first "not paid" after it.
func TestClosedAttemptQueriedUntilExpiry(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newRig(t, store)
		c := r.checkout(nil)
		c.PayTimeout = 3 * time.Hour

		o := mustOrder(t, store, newSN("EXP"), "8.00")
		mustStart(t, c, o.OrderSN, model.PayPage) // never opened: unknown to Alipay
		mustStart(t, c, o.OrderSN, model.PayQR)   // closes attempt 1
		a := mustAttempt(t, store, o.OrderSN)
		if a.State != model.AttemptClosed {
			t.Fatalf("attempt 1 is %s, want CLOSED", a.State)
		}
		for round := 1; round <= 9; round++ {
			queryNow(t, store, a)
			if _, err := r.recon.QueryDue(ctx); err != nil {
				t.Fatal(err)
			}
			a = mustAttempt(t, store, o.OrderSN)
			if a.State != model.AttemptClosed {
				t.Fatalf("round %d: attempt 1 is %s, want CLOSED until its expiry", round, a.State)
			}
			if last := a.ExpireAt.Add(time.Minute); a.NextQueryAt.After(last) {
				t.Fatalf("round %d (%d queries): next query %v is after the trade's expiry %v", round, a.Queries, a.NextQueryAt, a.ExpireAt)
			}
		}

		// Past its expiry, the next "not paid" retires it.
		if _, err := store.SQL().ExecContext(ctx, "UPDATE oms_pay_attempt SET expire_at = ? WHERE id = ?",
			time.Now().UTC().Add(-5*time.Minute), a.ID); err != nil {
			t.Fatal(err)
		}
		queryNow(t, store, a)
		if _, err := r.recon.QueryDue(ctx); err != nil {
			t.Fatal(err)
		}
		if a = mustAttempt(t, store, o.OrderSN); a.State != model.AttemptExpired {
			t.Fatalf("after its expiry attempt 1 is %s, want EXPIRED", a.State)
		}
	})
}
