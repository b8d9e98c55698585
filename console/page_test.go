package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/metrics"
	"paynotify/model"
)

// squash removes the whitespace between tags, so assertions can span them.
func squash(s string) string {
	return regexp.MustCompile(`>\s+<`).ReplaceAllString(s, "><")
}

func mustContain(tb testing.TB, page string, wants ...string) {
	tb.Helper()
	flat := squash(page)
	for _, w := range wants {
		if !strings.Contains(flat, w) {
			tb.Errorf("page lacks %q", w)
		}
	}
	if tb.Failed() {
		tb.Logf("page:\n%s", flat)
	}
}

func TestOverview(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		mustOrder(t, store, "OV-1", 1, "100.00")
		mustOrder(t, store, "OV-2", 1, "1234.50")
		mustOrder(t, store, "OV-3", 2, "88.00")
		for _, p := range []struct{ sn, trade, amount string }{
			{"OV-1", "T-OV-1", "100.00"},
			{"OV-2", "T-OV-2", "1234.50"},
			{"OV-2", "T-OV-2b", "1234.50"}, // paid twice: the second is owed back
			{"OV-3", "T-OV-3", "0.01"},     // amount differs
		} {
			e.pay(t, p.sn, p.trade, p.amount)
		}
		for outcome, n := range map[string]int{"duplicate": 3, "bad_signature": 2, "order_not_found": 1, "applied": 2} {
			for range n {
				e.metrics.Notified(model.ProviderAlipay, outcome, metrics.AnswerSuccess, time.Millisecond)
			}
		}

		page := e.signedIn(t, "alice").mustGet(t, "/console/", http.StatusOK)
		mustContain(t, page.body,
			"<dt>applied (orders paid)</dt><dd>2 · 1,334.50 CNY</dd>",
			"<dt>owed back</dt><dd>2 · 1,234.51 CNY</dd>",
			"<dt>money in</dt><dd>2,569.01 CNY</dd>",
			"<dt>duplicate</dt><dd>3</dd>",
			"<dt>failure</dt><dd>3</dd>",
			`payments owed back</a></td><td class="num">2</td>`,
			`outbox pending</a></td><td class="num">4</td>`,
			"<title>", // the chart has this minute's bar
		)
		if strings.Contains(page.body, "<script") {
			t.Error("the overview has a script: it must work without JavaScript")
		}
	})
}

func TestSearch(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		ctx := t.Context()
		o := mustOrder(t, store, "SE-1", 42, "20.00")
		if err := store.UpdateOrder(ctx, dao.OrderID(o.ID), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
			_, err := tx.InsertAttempt(ctx, model.PayAttempt{OrderID: o.ID, AttemptNo: 2, OutTradeNo: "SE-1-2", Method: model.PayPage,
				Amount: decimal.RequireFromString("20.00"), NextQueryAt: time.Now(), ExpireAt: time.Now().Add(time.Hour)})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		e.pay(t, "SE-1-2", "T-SE-1", "20.00")
		if _, err := e.refunds.Request(ctx, "SE-1", "rma-1", decimal.RequireFromString("5.00"), "returned"); err != nil {
			t.Fatal(err)
		}
		refunds, err := store.RefundsByOrder(ctx, o.ID)
		if err != nil || len(refunds) != 1 {
			t.Fatalf("refunds: %v %v", refunds, err)
		}
		// A payment whose order is gone (restored backup, deleted row).
		gone := mustOrder(t, store, "GONE-1", 42, "3.00")
		if err := store.UpdateOrder(ctx, dao.OrderID(gone.ID), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
			_, err := tx.InsertPayment(ctx, model.Payment{Provider: model.ProviderAlipay, TradeNo: "T-ORPHAN", OrderID: gone.ID,
				OutTradeNo: "GONE-1", Amount: decimal.RequireFromString("3.00"), State: model.PaymentRefundPending, Reason: model.RefundOrderClosed})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.SQL().ExecContext(ctx, "DELETE FROM oms_order WHERE id = ?", gone.ID); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			mustOrder(t, store, fmt.Sprintf("SE-M-%d", i), 43, "1.00")
		}
		c := e.signedIn(t, "alice")
		for _, tc := range []struct{ name, q, to string }{
			{"OrderSN", "SE-1", "/console/orders/SE-1"},
			{"OrderSNPadded", "  SE-1 ", "/console/orders/SE-1"},
			{"TradeNo", "T-SE-1", "/console/orders/SE-1"},
			{"OutTradeNoOfAttempt", "SE-1-2", "/console/orders/SE-1"},
			{"OutRequestNo", refunds[0].OutRequestNo, "/console/orders/SE-1"},
			{"OrphanPayment", "T-ORPHAN", "/console/payments/T-ORPHAN"},
			{"OrphanOutTradeNo", "GONE-1", "/console/payments/T-ORPHAN"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := c.mustGet(t, "/console/search?q="+url.QueryEscape(tc.q), http.StatusSeeOther)
				if r.location != tc.to {
					t.Fatalf("to %q, want %q", r.location, tc.to)
				}
				c.mustGet(t, tc.to, http.StatusOK)
			})
		}
		t.Run("Member", func(t *testing.T) {
			r := c.mustGet(t, "/console/search?q=43", http.StatusOK)
			mustContain(t, r.body, "Orders of member 43", ">SE-M-0<", ">SE-M-1<", ">SE-M-2<")
		})
		for _, q := range []string{"nothing-here", "🙂", "SE-1\x00", strings.Repeat("9", 200)} {
			t.Run("NotFound", func(t *testing.T) {
				r := c.mustGet(t, "/console/search?q="+url.QueryEscape(q), http.StatusNotFound)
				mustContain(t, r.body, "Nothing found")
			})
		}
		c.mustGet(t, "/console/orders/"+url.PathEscape("🙂"), http.StatusNotFound)
		c.mustGet(t, "/console/payments/"+url.PathEscape("🙂"), http.StatusNotFound)
	})
}

func TestMemberOrdersPaged(t *testing.T) {
	store := daotest.Open(t, dao.DriverSQLite)
	e := newEnv(t, store)
	for i := range 55 {
		mustOrder(t, store, fmt.Sprintf("PG-%02d", i), 77, "1.00")
	}
	c := e.signedIn(t, "alice")
	first := c.mustGet(t, "/console/search?q=77", http.StatusOK)
	next := regexp.MustCompile(`href="(/console/search\?q=77&amp;before=\d+)"`).FindStringSubmatch(first.body)
	if next == nil {
		t.Fatalf("no next page link:\n%s", first.body)
	}
	if strings.Count(first.body, `href="/console/orders/PG-`) != 50 || !strings.Contains(first.body, ">PG-54<") {
		t.Fatal("the first page is not the newest 50")
	}
	second := c.mustGet(t, strings.ReplaceAll(next[1], "&amp;", "&"), http.StatusOK)
	if strings.Count(second.body, `href="/console/orders/PG-`) != 5 || !strings.Contains(second.body, ">PG-00<") {
		t.Fatalf("the second page is not the oldest 5:\n%s", second.body)
	}
}

func TestTimeline(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		ctx := t.Context()
		coupon := int64(9)
		var sku int64
		for _, name := range []string{"Espresso beans 1kg", "Pour-over kettle", "Paper filters x100"} {
			var err error
			if sku, err = store.InsertSKU(ctx, name, decimal.RequireFromString("50.00"), 10); err != nil {
				t.Fatal(err)
			}
		}
		var id int64
		_, err := store.PlaceOrder(ctx, model.OrderRequest{MemberID: 5, IdempotencyKey: "tl-1", RequestHash: "h"}, func(ctx context.Context, tx *dao.PlaceTx) error {
			var err error
			id, err = tx.InsertOrder(ctx, model.Order{OrderSN: "TL-1", MemberID: 5, PayAmount: decimal.RequireFromString("70.00"),
				TotalAmount: decimal.RequireFromString("100.00"), CouponID: &coupon, CouponAmount: decimal.RequireFromString("20.00"),
				Integration: 1000, IntegrationAmount: decimal.RequireFromString("10.00")})
			if err != nil {
				return err
			}
			return tx.InsertItems(ctx, id, "TL-1", []model.OrderItem{{SKUID: sku, Quantity: 2, Price: decimal.RequireFromString("50.00")}})
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.UpdateOrder(ctx, dao.OrderID(id), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
			_, err := tx.InsertAttempt(ctx, model.PayAttempt{OrderID: id, AttemptNo: 1, OutTradeNo: "TL-1", Method: model.PayQR,
				Amount: decimal.RequireFromString("70.00"), NextQueryAt: time.Now(), ExpireAt: time.Now().Add(time.Hour)})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		e.pay(t, "TL-1", "T-TL-1", "70.00")
		e.pay(t, "TL-1", "T-TL-2", "70.00")
		// A refund with every kind of change: asked, retried after an
		// unknown outcome, refused, resolved by an operator.
		const no = "AS-TL-1"
		if err := store.UpdateOrder(ctx, dao.OrderID(id), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
			_, err := tx.InsertRefund(ctx, model.Refund{OutRequestNo: no, Kind: model.RefundAfterSale, Provider: model.ProviderAlipay,
				TradeNo: "T-TL-1", OutTradeNo: "TL-1", OrderID: id, Amount: decimal.RequireFromString("5.00")})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := store.RetryRefundAt(ctx, no, time.Now(), "ACQ.SYSTEM_ERROR"); err != nil {
			t.Fatal(err)
		}
		if err := store.UpdateOrder(ctx, dao.OrderID(id), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
			if _, err := tx.FinishRefund(ctx, no, model.RefundFailed, "ACQ.TRADE_STATUS_ERROR"); err != nil {
				return err
			}
			_, err := tx.ResolveRefund(ctx, no, "bob", "paid back by bank transfer", time.Now())
			return err
		}); err != nil {
			t.Fatal(err)
		}

		page := e.signedIn(t, "alice").mustGet(t, "/console/orders/TL-1", http.StatusOK)
		mustContain(t, page.body,
			`<span class="badge paid" title="PAID">paid</span>`,
			"coupon #9 −20.00 CNY; 1000 points −10.00 CNY",
			"<strong>Pay attempt #1 opened</strong>",
			"<strong>Pay attempt #1 paid</strong>",
			"<strong>Payment recorded, decided: applied</strong>",
			// What was decided then, and where it is now: never a bare
			// decision beside a badge of another state.
			`<strong>Payment recorded, decided: owed back</strong><span class="badge refund_pending" title="REFUND_PENDING">now owed back</span>`,
			"reason ALREADY_PAID",
			"<strong>Event order.paid</strong>",
			"<strong>Event payment.refund_pending</strong>",
			`<dt>left to refund</dt><dd>70.00 CNY</dd>`,
			`href="/console/payments/T-TL-2"`,
			// An item is its product, not only a SKU id.
			fmt.Sprintf("<td>Paper filters x100</td><td>%d</td><td class=\"num\">2</td><td class=\"num\">50.00 CNY</td>", sku),
		)
		// Every change of the refund, in order, its ids linked.
		flat := squash(page.body)
		last := -1
		for _, w := range []string{
			"<strong>Refund requested: after-sale",
			"<strong>Refund outcome unknown: asked again later</strong>",
			"ACQ.SYSTEM_ERROR",
			"<strong>Refund failed</strong>",
			"ACQ.TRADE_STATUS_ERROR",
			"<strong>Refund resolved by bob</strong>",
			"paid back by bank transfer",
		} {
			i := strings.Index(flat[last+1:], w)
			if i < 0 {
				t.Errorf("the story lacks %q after what came before", w)
				continue
			}
			last += 1 + i
		}
		mustContain(t, page.body,
			`; member <a href="/console/search?q=5"><code class="id">5</code></a>`,
			`trade_no <a href="/console/payments/T-TL-2"><code class="id">T-TL-2</code></a>, 70.00 CNY`,
			`of trade <a href="/console/payments/T-TL-1"><code class="id">T-TL-1</code></a>, out_request_no <a href="/console/search?q=AS-TL-1"><code class="id">AS-TL-1</code></a>`,
			`out_trade_no <a href="/console/search?q=TL-1"><code class="id">TL-1</code></a>`,
		)
		// The story is in time order: placed, attempt, then payments.
		placed, applied, pending := strings.Index(flat, "Order placed"), strings.Index(flat, "Payment recorded, decided: applied"), strings.Index(flat, "Payment recorded, decided: owed back")
		if !(placed < applied && applied < pending) {
			t.Errorf("story out of order: placed %d, applied %d, refund_pending %d", placed, applied, pending)
		}
		// Times in the operator's zone, UTC on hover.
		o := mustGetOrder(t, store, "TL-1")
		sh, _ := time.LoadLocation("Asia/Shanghai")
		mustContain(t, page.body, fmt.Sprintf(`<time datetime="%s" title="%s UTC">%s</time>`,
			o.CreateTime.UTC().Format(time.RFC3339), o.CreateTime.UTC().Format("2006-01-02 15:04:05"),
			o.CreateTime.In(sh).Format("2006-01-02 15:04:05")))
	})
}

func mustGetOrder(tb testing.TB, store *dao.Store, sn string) model.Order {
	tb.Helper()
	o, err := store.Order(tb.Context(), sn)
	if err != nil {
		tb.Fatal(err)
	}
	return o
}

func TestQueues(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		ctx := t.Context()
		o := mustOrder(t, store, "QU-1", 1, "10.00")
		e.pay(t, "QU-1", "T-QU-1", "10.00")
		for i := range 51 {
			no := fmt.Sprintf("AS-QU-%02d", i)
			if err := store.UpdateOrder(ctx, dao.OrderID(o.ID), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
				if _, err := tx.InsertRefund(ctx, model.Refund{OutRequestNo: no, Kind: model.RefundAfterSale, Provider: model.ProviderAlipay,
					TradeNo: "T-QU-1", OutTradeNo: "QU-1", OrderID: o.ID, Amount: decimal.RequireFromString("0.10")}); err != nil {
					return err
				}
				_, err := tx.FinishRefund(ctx, no, model.RefundFailed, "ACQ.TRADE_HAS_CLOSE")
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		// The order's outbox row fails for good.
		var claimed []model.OutboxRow
		if err := store.UpdateOutbox(ctx, func(ctx context.Context, tx *dao.OutboxTx) error {
			var err error
			if claimed, err = tx.ClaimEvents(ctx, time.Now(), time.Minute, 10); err != nil || len(claimed) != 1 {
				return fmt.Errorf("claimed %v: %v", claimed, err)
			}
			return tx.MarkFailed(ctx, claimed[0].Seq, 10, time.Now().Add(time.Hour), 10, "nats: no responders")
		}); err != nil {
			t.Fatal(err)
		}
		c := e.signedIn(t, "alice")

		r := c.mustGet(t, "/console/queues/refunds", http.StatusOK)
		mustContain(t, r.body, "51 refund(s) failed and not resolved", ">AS-QU-00<", "ACQ.TRADE_HAS_CLOSE", `href="/console/orders/QU-1"`,
			`href="/console/queues/refunds?state=REFUND_FAILED&amp;page=1"`)
		if strings.Contains(r.body, ">AS-QU-50<") {
			t.Error("page 0 lists the 51st refund")
		}
		r = c.mustGet(t, "/console/queues/refunds?state=REFUND_FAILED&page=1", http.StatusOK)
		mustContain(t, r.body, ">AS-QU-50<")
		mustContain(t, c.mustGet(t, "/console/queues/refunds?state=REFUNDING", http.StatusOK).body, "0 refund(s); oldest waiting")
		// Refunded is done: nothing there is waiting.
		if r := c.mustGet(t, "/console/queues/refunds?state=REFUNDED", http.StatusOK); !strings.Contains(r.body, "0 refund(s) confirmed by their provider.") ||
			strings.Contains(r.body, "waiting") {
			t.Errorf("the REFUNDED tab reads as a queue:\n%s", r.body)
		}
		c.mustGet(t, "/console/queues/refunds?state=bogus", http.StatusBadRequest)

		r = c.mustGet(t, "/console/queues/outbox", http.StatusOK)
		mustContain(t, r.body, "1 event(s) failed", "order.paid", "nats: no responders", `href="/console/orders/QU-1"`)
		c.mustGet(t, "/console/queues/outbox?state=SENT", http.StatusOK)
		c.mustGet(t, "/console/queues/outbox?state=bogus", http.StatusBadRequest)

		// Sign-ins are hidden unless asked for: they would bury the actions.
		if r = c.mustGet(t, "/console/audit?operator=alice", http.StatusOK); strings.Contains(r.body, "session.sign_in") {
			t.Errorf("the audit log shows sign-ins unasked:\n%s", r.body)
		}
		r = c.mustGet(t, "/console/audit?operator=alice&sessions=1", http.StatusOK)
		mustContain(t, r.body, "<td>alice</td><td>session.sign_in</td>")
		// A sign-in's expiry is a time like any other: the operator's
		// zone, UTC on hover.
		if !regexp.MustCompile(`signed in until <time datetime="[0-9T:-]+Z" title="[0-9: -]+ UTC">[0-9: -]+</time>`).MatchString(r.body) {
			t.Errorf("the sign-in's expiry is not shown as a time:\n%s", r.body)
		}
		r = c.mustGet(t, "/console/audit?operator=bob", http.StatusOK)
		mustContain(t, r.body, "No action recorded")
	})
}

func TestSecurityHeaders(t *testing.T) {
	store := daotest.Open(t, dao.DriverSQLite)
	e := newEnv(t, store)
	r := e.client(t).mustGet(t, "/console/login", http.StatusOK)
	for k, want := range map[string]string{
		"X-Frame-Options": "DENY", "Cache-Control": "no-store", "Referrer-Policy": "same-origin", "X-Content-Type-Options": "nosniff",
	} {
		if got := r.header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Errorf("CSP %q: want no script source at all", csp)
	}
	e.client(t).mustGet(t, "/console/static/console.css", http.StatusOK)
}

// A WeChat Pay payment is shown and refunded at its provider's address;
// every row says whose it is.
func TestWechatpayPaymentPages(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		c := e.signedIn(t, "alice")
		at := time.Now().UTC().Truncate(time.Second)
		if _, outcome, err := e.payments.Observe(t.Context(), model.Observation{Provider: model.ProviderWechatpay, Ref: "wx-1",
			OutTradeNo: "WX-NONE", TradeNo: "4200000009", Amount: decimal.RequireFromString("8.00"), PaidAt: &at}); err != nil || outcome != model.OutcomeUnmatched {
			t.Fatalf("observe: %s %v", outcome, err)
		}
		r := c.mustGet(t, "/console/queues/payments?state=UNMATCHED", http.StatusOK)
		mustContain(t, r.body, "<td>WeChat Pay</td>", `href="/console/payments/wechatpay/4200000009/refund"`)
		r = c.mustGet(t, "/console/payments/wechatpay/4200000009", http.StatusOK)
		mustContain(t, r.body, "<dd>WeChat Pay</dd>", "paid at WeChat Pay")
		c.mustGet(t, "/console/payments/4200000009", http.StatusNotFound) // the form without a provider is Alipay's
		c.mustGet(t, "/console/payments/paypal/4200000009", http.StatusNotFound)
		r = c.mustGet(t, "/console/payments/wechatpay/4200000009/refund", http.StatusOK)
		mustContain(t, r.body, "WeChat Pay")
		if found := c.mustGet(t, "/console/search?q=4200000009", http.StatusSeeOther); found.location != "/console/payments/wechatpay/4200000009" {
			t.Fatalf("search leads to %q", found.location)
		}
	})
}

// The console says what the enums mean: why a payment is owed back in
// words (the enum in its title), and no peak on a chart with no payment.
func TestPagesSayWords(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		c := e.signedIn(t, "alice")
		mustContain(t, c.mustGet(t, "/console/", http.StatusOK).body, "No payment in these two hours.")
		mustOrder(t, store, "WD-1", 1, "30.00")
		e.pay(t, "WD-1", "T-WD-1", "30.00")
		e.pay(t, "WD-1", "T-WD-2", "30.00") // paid twice: owed back
		e.pay(t, "GONE-9", "T-WD-3", "1.00")
		mustOrder(t, store, "WD-2", 1, "30.00")
		e.pay(t, "WD-2", "T-WD-4", "0.01") // too little
		queue := c.mustGet(t, "/console/queues/payments?state=REFUND_PENDING", http.StatusOK)
		mustContain(t, queue.body, `<span title="ALREADY_PAID">order already paid</span>`, `<span title="AMOUNT_MISMATCH">amount differs from the order&#39;s</span>`)
		mustContain(t, c.mustGet(t, "/console/orders/WD-1", http.StatusOK).body, "why: order already paid")
		if ov := c.mustGet(t, "/console/", http.StatusOK).body; strings.Contains(ov, "No payment in these two hours.") || !strings.Contains(ov, "Peak ") {
			t.Errorf("the chart of three payments:\n%s", squash(ov))
		}
	})
}
