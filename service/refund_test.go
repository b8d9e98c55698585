package service_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/fakealipay"
	"paynotify/internal/devkey"
	"paynotify/model"
	"paynotify/service"
)

// paidOrder is an order of amount paid through a QR code, its
// notification delivered: one APPLIED payment.
func paidOrder(t *testing.T, r *rig, c *service.Checkout, prefix, amount string) model.Order {
	t.Helper()
	o := mustOrder(t, r.store, newSN(prefix), amount)
	v := mustStart(t, c, o.OrderSN, model.PayQR)
	if err := r.fake.Pay(ctx, v.OutTradeNo); err != nil {
		t.Fatalf("pay: %v", err)
	}
	if ps := mustPayments(t, r.store, o.ID); len(ps) != 1 || ps[0].State != model.PaymentApplied {
		t.Fatalf("payments %+v, want one APPLIED", ps)
	}
	return mustGetOrder(t, r.store, o.OrderSN)
}

// owedBack is an order of amount cancelled while its buyer paid, its
// notification delivered: one REFUND_PENDING payment.
func owedBack(t *testing.T, r *rig, c *service.Checkout, prefix, amount string) model.Order {
	t.Helper()
	o := mustOrder(t, r.store, newSN(prefix), amount)
	v := mustStart(t, c, o.OrderSN, model.PayQR)
	if _, err := r.orders.Cancel(ctx, rigMember, o.OrderSN); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if err := r.fake.Pay(ctx, v.OutTradeNo); err != nil {
		t.Fatalf("pay: %v", err)
	}
	if ps := mustPayments(t, r.store, o.ID); len(ps) != 1 || ps[0].State != model.PaymentRefundPending {
		t.Fatalf("payments %+v, want one REFUND_PENDING", ps)
	}
	return o
}

// onlyRefund is an order's one refund.
func onlyRefund(t *testing.T, store *dao.Store, orderID int64) model.Refund {
	t.Helper()
	fs, err := store.RefundsByOrder(ctx, orderID)
	if err != nil || len(fs) != 1 {
		t.Fatalf("refunds of order %d: %+v, %v; want one", orderID, fs, err)
	}
	return fs[0]
}

// retryNow makes a refund due now.
func retryNow(t *testing.T, store *dao.Store, outRequestNo string) {
	t.Helper()
	if err := store.RetryRefundAt(ctx, outRequestNo, time.Now(), ""); err != nil {
		t.Fatalf("retry refund: %v", err)
	}
}

// A refund whose first ask has no trustworthy answer is asked about before
// it is asked again: it ends REFUNDED with exactly one refund at Alipay,
// whether the first ask refunded (timeout) or not (dropped, system error).
// A signed refusal ends it REFUND_FAILED.
func TestRefundUnknownOutcome(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newRig(t, store)
		c := r.checkout(nil)
		cases := []struct {
			name  string
			fault func()
			// firstCtx bounds the first Execute.
			firstCtx time.Duration
			// refundedFirst: Alipay refunded on the first ask.
			refundedFirst bool
			// wantCalls of refund at Alipay in all.
			wantCalls int
			want      model.RefundState
		}{
			{name: "AnswerTimesOut", firstCtx: time.Second, refundedFirst: true, wantCalls: 1, want: model.RefundRefunded,
				fault: func() { r.fake.TimeoutNext(fakealipay.MethodRefund, 5*time.Second, 1) }},
			{name: "Dropped", firstCtx: 10 * time.Second, wantCalls: 2, want: model.RefundRefunded,
				fault: func() { r.fake.DropNext(fakealipay.MethodRefund, 1) }},
			{name: "SignedSystemError", firstCtx: 10 * time.Second, wantCalls: 2, want: model.RefundRefunded,
				fault: func() { r.fake.FailNext(fakealipay.MethodRefund, "40004", "ACQ.SYSTEM_ERROR", 1) }},
			{name: "SignedRefusal", firstCtx: 10 * time.Second, wantCalls: 1, want: model.RefundFailed,
				fault: func() { r.fake.FailNext(fakealipay.MethodRefund, "40004", "ACQ.TRADE_STATUS_ERROR", 1) }},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				var told []model.RefundState
				r.refunds.OnFinished = func(_ model.Refund, to model.RefundState) { told = append(told, to) }
				defer func() { r.refunds.OnFinished = nil }()
				o := owedBack(t, r, c, "RU", "66.00")
				if n, err := r.refunds.Enqueue(ctx); err != nil || n != 1 {
					t.Fatalf("Enqueue = %d, %v; want 1", n, err)
				}
				f := onlyRefund(t, store, o.ID)
				calls := r.fake.Calls(fakealipay.MethodRefund)

				tc.fault()
				first, cancel := context.WithTimeout(ctx, tc.firstCtx)
				n, err := r.refunds.Execute(first)
				cancel()
				// After a timeout of its own context the worker cannot record
				// the retry either; the claim's lease brings it back.
				t.Logf("first Execute: %d, %v", n, err)
				if n != 0 {
					t.Fatalf("first Execute finished %d refunds, want none", n)
				}
				r.fake.WaitNotifications()
				wantRefunds := 0
				if tc.refundedFirst {
					wantRefunds = 1
				}
				if got := len(mustTrade(t, r.fake, o.OrderSN).Refunds); got != wantRefunds {
					t.Fatalf("after the first ask Alipay holds %d refunds, want %d", got, wantRefunds)
				}

				if tc.want == model.RefundRefunded {
					if got := onlyRefund(t, store, o.ID); got.State != model.RefundRefunding || got.Attempts != 1 {
						t.Fatalf("refund after the first ask: %s after %d attempts, want REFUNDING after 1", got.State, got.Attempts)
					}
					retryNow(t, store, f.OutRequestNo)
					if n, err := r.refunds.Execute(ctx); err != nil || n != 1 {
						t.Fatalf("second Execute = %d, %v; want 1", n, err)
					}
					r.fake.WaitNotifications()
					checkRefundedOnce(t, r, o, o.OrderSN, "66.00")
				} else {
					if tr := mustTrade(t, r.fake, o.OrderSN); len(tr.Refunds) != 0 {
						t.Fatalf("refused, yet Alipay holds %+v", tr.Refunds)
					}
					if ps := mustPayments(t, store, o.ID); ps[0].State != model.PaymentRefundFailed {
						t.Fatalf("payment %s, want REFUND_FAILED", ps[0].State)
					}
					if n := eventCount(t, store, o.ID, model.EventRefundFailed); n != 1 {
						t.Fatalf("%d payment.refund_failed events, want 1", n)
					}
				}
				if got := onlyRefund(t, store, o.ID); got.State != tc.want {
					t.Fatalf("refund %s, want %s", got.State, tc.want)
				}
				if got := r.fake.Calls(fakealipay.MethodRefund) - calls; got != tc.wantCalls {
					t.Fatalf("%d refund calls at Alipay, want %d", got, tc.wantCalls)
				}
				if len(told) != 1 || told[0] != tc.want {
					t.Fatalf("OnFinished told %v, want once %s", told, tc.want)
				}
			})
		}
	})
}

// Two instances (two pools on one database, two workers each) enqueue and
// execute the same refunds round after round, their refund notifications
// coming back meanwhile: each payment is refunded exactly once, with one
// refund row and one event. With a lease shorter than a call, the
// instances also ask Alipay about refunds the other is still asking for.
func TestRefundWorkersInTwoInstances(t *testing.T) {
	for _, driver := range daotest.Drivers {
		t.Run(driver, func(t *testing.T) {
			for _, lease := range []struct {
				name string
				d    time.Duration
			}{{name: "Lease1m", d: time.Minute}, {name: "LeaseShorterThanACall", d: time.Millisecond}} {
				t.Run(lease.name, func(t *testing.T) {
					a, b := openTwice(t, driver)
					r := newRig(t, a)
					c := r.checkout(nil)
					const n = 12
					orders := make([]model.Order, n)
					for i := range orders {
						orders[i] = owedBack(t, r, c, "RW", fmt.Sprintf("%d.00", 10+i))
					}

					var workers []*service.Refunds
					var mu sync.Mutex
					finished := map[model.RefundState]int{}
					for _, store := range []*dao.Store{a, b, a, b} {
						w := service.NewRefunds(store, r.providers(), quietLog)
						w.Batch, w.Lease = 3, lease.d
						w.OnFinished = func(_ model.Refund, to model.RefundState) {
							mu.Lock()
							defer mu.Unlock()
							finished[to]++
						}
						workers = append(workers, w)
					}
					errs := make([]error, len(workers))
					startAll(len(workers), func(i int) { errs[i] = refundUntilDone(workers[i], a) })
					for i, err := range errs {
						if err != nil {
							t.Fatalf("worker %d: %v", i, err)
						}
					}
					r.fake.WaitNotifications()
					for _, o := range orders {
						checkRefundedOnce(t, r, o, o.OrderSN, o.PayAmount.StringFixed(2))
						if f := onlyRefund(t, a, o.ID); f.State != model.RefundRefunded {
							t.Fatalf("refund %s, want REFUNDED", f.State)
						}
					}
					// What the refunds metric counts: each refund once, however
					// many workers raced for it.
					if want := map[model.RefundState]int{model.RefundRefunded: n}; !maps.Equal(finished, want) {
						t.Errorf("OnFinished told %v, want %v", finished, want)
					}
					t.Logf("%d refund calls, %d refund queries at Alipay for %d refunds",
						r.fake.Calls(fakealipay.MethodRefund), r.fake.Calls(fakealipay.MethodRefundQuery), n)
				})
			}
		})
	}
}

// refundUntilDone runs rounds of the refund worker, as RunJobs does, until no
// payment is owed back and no refund is in progress. A round may fail with
// model.ErrRetryable, as a job's rounds may; it then goes on, up to a
// deadline.
func refundUntilDone(w *service.Refunds, store *dao.Store) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := w.Enqueue(ctx); err != nil && !errors.Is(err, model.ErrRetryable) {
			return err
		}
		if _, err := w.Execute(ctx); err != nil && !errors.Is(err, model.ErrRetryable) {
			return err
		}
		var left int
		err := store.SQL().QueryRowContext(ctx,
			"SELECT (SELECT COUNT(*) FROM oms_order_payment WHERE state IN (?, ?)) + (SELECT COUNT(*) FROM oms_refund WHERE state = ?)",
			model.PaymentRefundPending, model.PaymentRefunding, model.RefundRefunding).Scan(&left)
		if err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d payments or refunds still in progress at the deadline", left)
		}
	}
}

// postNotification posts a signed notification form to the notify
// endpoint and returns the answer.
func postNotification(t *testing.T, notifyURL string, form map[string][]string) string {
	t.Helper()
	resp, err := http.PostForm(notifyURL, form)
	if err != nil {
		t.Fatalf("notify: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// An operator's partial refunds add up, never past what was paid; a key
// names one refund; and the refund notifications Alipay sends are never
// taken for payments.
func TestAfterSaleRefunds(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newRig(t, store)
		c := r.checkout(nil)
		o := paidOrder(t, r, c, "AS", "100.00")
		request := func(key, amount string) (model.Refund, error) {
			return r.refunds.Request(ctx, o.OrderSN, key, decimal.RequireFromString(amount), "after-sale")
		}
		k1, err := request("k1", "30.00")
		if err != nil {
			t.Fatalf("k1: %v", err)
		}

		steps := []struct {
			name, key, amount string
			want              error
			wantSame          bool // answered with k1's refund
		}{
			{name: "SecondPartial", key: "k2", amount: "50.00"},
			{name: "OverRefund", key: "k3", amount: "30.00", want: model.ErrRefundTooLarge},
			{name: "SameKeySameAmount", key: "k1", amount: "30.00", wantSame: true},
			{name: "SameKeyOtherAmount", key: "k1", amount: "31.00", want: model.ErrIdempotencyKeyReused},
			{name: "ThreeDecimals", key: "k4", amount: "0.001", want: model.ErrInvalidRequest},
			{name: "Zero", key: "k4", amount: "0", want: model.ErrInvalidRequest},
			{name: "NoKey", key: "", amount: "1.00", want: model.ErrInvalidRequest},
		}
		for _, s := range steps {
			t.Run(s.name, func(t *testing.T) {
				before := countRows(t, store, "oms_refund", "order_id = ?", o.ID)
				f, err := request(s.key, s.amount)
				if !errors.Is(err, s.want) {
					t.Fatalf("Request(%q, %s) = %v, want %v", s.key, s.amount, err, s.want)
				}
				if s.wantSame && (f.OutRequestNo != k1.OutRequestNo || !f.Amount.Equal(k1.Amount)) {
					t.Fatalf("same key answered %+v, want k1's %+v", f, k1)
				}
				wantGrow := 0
				if s.want == nil && !s.wantSame {
					wantGrow = 1
				}
				if grew := countRows(t, store, "oms_refund", "order_id = ?", o.ID) - before; grew != wantGrow {
					t.Fatalf("%d refund rows added, want %d", grew, wantGrow)
				}
			})
		}
		t.Run("UnpaidOrder", func(t *testing.T) {
			u := mustOrder(t, store, newSN("AU"), "5.00")
			if _, err := r.refunds.Request(ctx, u.OrderSN, "k", decimal.RequireFromString("1.00"), ""); !errors.Is(err, model.ErrNothingToRefund) {
				t.Fatalf("refund of an unpaid order = %v, want ErrNothingToRefund", err)
			}
		})

		t.Run("ExecutedOnceEach", func(t *testing.T) {
			if n, err := r.refunds.Execute(ctx); err != nil || n != 2 {
				t.Fatalf("Execute = %d, %v; want 2", n, err)
			}
			r.fake.WaitNotifications()
			tr := mustTrade(t, r.fake, o.OrderSN)
			if len(tr.Refunds) != 2 || tr.Refunded().StringFixed(2) != "80.00" || tr.Status != alipay.TradeSuccess {
				t.Fatalf("Alipay holds %+v (%s), want two refunds of 80.00 in all, trade still TRADE_SUCCESS", tr.Refunds, tr.Status)
			}
			if n := eventCount(t, store, o.ID, model.EventRefunded); n != 2 {
				t.Fatalf("%d payment.refunded events, want 2", n)
			}
			// After-sale refunds leave the payment and the order as they are.
			if ps := mustPayments(t, store, o.ID); len(ps) != 1 || ps[0].State != model.PaymentApplied {
				t.Fatalf("payments %+v, want the one APPLIED", ps)
			}
			if got := mustGetOrder(t, store, o.OrderSN); got.Status != model.OrderPaid {
				t.Fatalf("order %s, want PAID", got.Status)
			}
		})

		t.Run("RefundNotificationsAreNotPayments", func(t *testing.T) {
			var refundNotes []fakealipay.Notification
			for _, n := range r.fake.Notifications() {
				if n.Form.Get("out_biz_no") != "" {
					refundNotes = append(refundNotes, n)
				}
			}
			if len(refundNotes) != 2 {
				t.Fatalf("%d refund notifications sent, want 2", len(refundNotes))
			}
			for _, n := range refundNotes {
				if n.Outcome != fakealipay.Acknowledged || n.Form.Get("trade_status") != string(alipay.TradeSuccess) {
					t.Fatalf("refund notification %s: %s %q", n.Form.Get("trade_status"), n.Outcome, n.Answer)
				}
			}
			// A refund notice for a refund we never asked for, signed by
			// Alipay: acknowledged, and still no payment.
			form := make(map[string][]string)
			for k, vs := range refundNotes[0].Form {
				if k != "sign" && k != "sign_type" {
					form[k] = vs
				}
			}
			form["out_biz_no"] = []string{"UNKNOWN-REFUND"}
			form["refund_fee"] = []string{"99.00"}
			form["notify_id"] = []string{"hand-built-refund-notice"}
			signed, err := alipay.SignForm(devkey.Read(t, "alipay_private_key.pem"), form)
			if err != nil {
				t.Fatal(err)
			}
			if got := postNotification(t, r.notifyURL, signed); got != "success" {
				t.Fatalf("hand-built refund notice answered %q, want success", got)
			}
			if err := r.fake.Resend(ctx, len(r.fake.Notifications())-1); err != nil {
				t.Fatalf("resend of the last notification: %v", err)
			}
			if ps := mustPayments(t, store, o.ID); len(ps) != 1 || ps[0].State != model.PaymentApplied {
				t.Fatalf("payments %+v after refund notices, want the one APPLIED", ps)
			}
			if got := mustGetOrder(t, store, o.OrderSN); got.Status != model.OrderPaid {
				t.Fatalf("order %s, want PAID", got.Status)
			}
			if n := eventCount(t, store, o.ID, model.EventOrderPaid); n != 1 {
				t.Fatalf("%d order.paid events, want 1", n)
			}
		})

		t.Run("TheRestAndNoMore", func(t *testing.T) {
			if _, err := request("k5", "20.00"); err != nil {
				t.Fatalf("refund of exactly what is left: %v", err)
			}
			if _, err := request("k6", "0.01"); !errors.Is(err, model.ErrRefundTooLarge) {
				t.Fatalf("refund past the total = %v, want ErrRefundTooLarge", err)
			}
			if n, err := r.refunds.Execute(ctx); err != nil || n != 1 {
				t.Fatalf("Execute = %d, %v; want 1", n, err)
			}
			r.fake.WaitNotifications()
			tr := mustTrade(t, r.fake, o.OrderSN)
			if len(tr.Refunds) != 3 || !tr.Refunded().Equal(tr.TotalAmount) || tr.Status != alipay.TradeClosed {
				t.Fatalf("Alipay holds %+v (%s), want everything refunded and the trade closed", tr.Refunds, tr.Status)
			}
			// The full refund's notice says TRADE_CLOSED: still not a payment.
			notes := r.fake.Notifications()
			if last := notes[len(notes)-1]; last.Outcome != fakealipay.Acknowledged || last.Form.Get("trade_status") != string(alipay.TradeClosed) {
				t.Fatalf("full refund notice %s: %s %q", last.Form.Get("trade_status"), last.Outcome, last.Answer)
			}
			if ps := mustPayments(t, store, o.ID); len(ps) != 1 {
				t.Fatalf("%d payments, want 1", len(ps))
			}
		})
	})
}

// Operators asking at once: with their own keys, never more than was paid
// in all; with one key, one refund.
func TestAfterSaleRefundsInParallel(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newRig(t, store)
		c := r.checkout(nil)

		t.Run("OwnKeys", func(t *testing.T) {
			o := paidOrder(t, r, c, "AP", "100.00")
			const n = 30
			errs := make([]error, n)
			startAll(n, func(i int) {
				_, errs[i] = r.refunds.Request(ctx, o.OrderSN, fmt.Sprintf("key-%d", i), decimal.RequireFromString("10.00"), "")
			})
			accepted := 0
			for i, err := range errs {
				switch {
				case err == nil:
					accepted++
				case !errors.Is(err, model.ErrRefundTooLarge):
					t.Fatalf("request %d: %v", i, err)
				}
			}
			if rows := countRows(t, store, "oms_refund", "order_id = ?", o.ID); accepted != 10 || rows != 10 {
				t.Fatalf("%d accepted, %d rows; want 10 of 10.00 for 100.00 paid", accepted, rows)
			}
		})

		t.Run("OneKey", func(t *testing.T) {
			o := paidOrder(t, r, c, "AK", "100.00")
			const n = 20
			got := make([]model.Refund, n)
			errs := make([]error, n)
			startAll(n, func(i int) {
				got[i], errs[i] = r.refunds.Request(ctx, o.OrderSN, "same-key", decimal.RequireFromString("25.00"), "")
			})
			seen := map[string]bool{}
			for i, err := range errs {
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				seen[got[i].OutRequestNo] = true
			}
			if rows := countRows(t, store, "oms_refund", "order_id = ?", o.ID); len(seen) != 1 || rows != 1 {
				t.Fatalf("%d refunds answered, %d rows; want one", len(seen), rows)
			}
			if !strings.HasPrefix(got[0].OutRequestNo, "AS-") {
				t.Fatalf("out_request_no %q", got[0].OutRequestNo)
			}
		})
	})
}
