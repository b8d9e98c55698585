package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
)

func TestUnmatchedPayment(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		ctx := t.Context()
		if got := e.pay(t, "GONE-77", "T-UM-1", "42.00"); got != model.OutcomeUnmatched {
			t.Fatalf("a payment for no order: %s", got)
		}
		c := e.signedIn(t, "alice")
		ov := c.mustGet(t, "/console/", http.StatusOK)
		mustContain(t, ov.body, "<dt>unmatched</dt><dd>1 · 42.00 CNY</dd>",
			`unmatched payments</a></td><td class="num">1</td>`)

		queue := c.mustGet(t, "/console/queues/payments?state=UNMATCHED", http.StatusOK)
		mustContain(t, queue.body, "1 payment(s) unmatched (no order)", `href="/console/payments/T-UM-1/refund"`)
		page := c.mustGet(t, "/console/payments/T-UM-1", http.StatusOK)
		mustContain(t, page.body, "none recorded", "Refund this payment…")

		path := "/console/payments/T-UM-1/refund"
		confirm := c.mustGet(t, path, http.StatusOK)
		mustContain(t, confirm.body, "no order has its out_trade_no", "42.00 CNY")
		form := url.Values{"csrf": {c.csrf(t)}, "key": {field(t, keyField, confirm.body)}, "note": {"no such order in any backup"}}
		refused(t, e, c, path, form)
		if p, _ := store.Payment(ctx, model.ProviderAlipay, "T-UM-1"); p.State != model.PaymentUnmatched {
			t.Fatalf("refused posts moved the payment: %s", p.State)
		}
		postTwice(t, c, path, form, "/console/payments/T-UM-1")
		p, err := store.Payment(ctx, model.ProviderAlipay, "T-UM-1")
		if err != nil || p.State != model.PaymentRefundPending {
			t.Fatalf("after the refund: %s %v", p.State, err)
		}
		rows := actions(t, store, model.AuditPaymentRefund)
		if len(rows) != 1 || rows[0].Before != "UNMATCHED" || rows[0].OrderID != nil || rows[0].Note != "no such order in any backup" {
			t.Fatalf("audit: %+v", rows)
		}
		// The refund worker carries it on; the refund has no order.
		if n, err := e.refunds.Enqueue(ctx); err != nil || n != 1 {
			t.Fatalf("enqueue: %d %v", n, err)
		}
		r := c.mustGet(t, "/console/queues/refunds?state=REFUNDING", http.StatusOK)
		mustContain(t, r.body, ">RP-T-UM-1<", "<td>none</td>")
		// It is no longer unmatched: asking again is refused, and changes nothing.
		if r := c.post(t, path, url.Values{"csrf": form["csrf"], "key": {strings.Repeat("a", 32)}}); r.status != http.StatusConflict {
			t.Fatalf("refund a payment on its way back: %d", r.status)
		}
		if n := len(actions(t, store, model.AuditPaymentRefund)); n != 1 {
			t.Fatalf("%d refunds audited", n)
		}
	})
}

// reconRun records a finished reconciliation of date with items, as a run
// does.
func reconRun(tb testing.TB, store *dao.Store, date string, items ...model.ReconItem) model.ReconRun {
	tb.Helper()
	ctx := tb.Context()
	run, attempt, err := store.ClaimRun(ctx, model.ProviderAlipay, date, "test", time.Now(), time.Minute, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range items {
		items[i].RunID, items[i].AttemptNo = run.ID, attempt
	}
	if err := store.SaveItems(ctx, items); err != nil {
		tb.Fatal(err)
	}
	if err := store.FinishRun(ctx, run.ID, "test", attempt, dao.RunResult{State: model.ReconDone, Items: len(items)}, time.Now()); err != nil {
		tb.Fatal(err)
	}
	run, err = store.ReconRun(ctx, model.ProviderAlipay, date)
	if err != nil {
		tb.Fatal(err)
	}
	return run
}

func TestReconQueue(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		ctx := t.Context()
		mustOrder(t, store, "RC-1", 1, "30.00")
		e.pay(t, "RC-1", "T-RC-1", "30.00")
		bill, ledger := decimal.RequireFromString("29.00"), decimal.RequireFromString("30.00")
		reconRun(t, store, "2026-11-30",
			model.ReconItem{Outcome: model.ReconAmountDiffers, Ref: "T-RC-1", TradeNo: "T-RC-1", OutTradeNo: "RC-1",
				BillAmount: &bill, LedgerAmount: &ledger, Detail: "the bill says 29.00"},
			model.ReconItem{Outcome: model.ReconRepaired, Ref: "T-RC-9", TradeNo: "T-RC-9", Detail: "recorded from the bill as APPLIED"},
		)
		c := e.signedIn(t, "alice")
		ov := c.mustGet(t, "/console/", http.StatusOK)
		mustContain(t, ov.body, `reconciliation differences</a></td><td class="num">1</td>`, `>2026-11-30</a><span class="badge done" title="DONE">done</span>, 1 unresolved`)

		queue := c.mustGet(t, "/console/queues/reconciliation", http.StatusOK)
		mustContain(t, queue.body, "1 item(s) unresolved", "AMOUNT_DIFFERS", "the bill says 29.00", "29.00 CNY",
			// The item beside where its payment stands in our ledger.
			`<span class="badge applied" title="payment APPLIED">payment applied</span>`)
		if strings.Contains(queue.body, "T-RC-9") {
			t.Error("a REPAIRED item is listed as needing a look")
		}
		mustContain(t, c.mustGet(t, "/console/queues/reconciliation?all=1", http.StatusOK).body, "T-RC-9")
		mustContain(t, c.mustGet(t, "/console/queues/reconciliation?outcome=REPAIRED&all=1", http.StatusOK).body, "T-RC-9")
		c.mustGet(t, "/console/queues/reconciliation?outcome=BOGUS", http.StatusBadRequest)
		// The order's timeline shows what reconciliation found.
		mustContain(t, c.mustGet(t, "/console/orders/RC-1", http.StatusOK).body, "Reconciliation of 2026-11-30: AMOUNT_DIFFERS")

		items, err := store.ReconItems(ctx, reconRunID(t, store, "2026-11-30"), model.ReconAmountDiffers, 10)
		if err != nil || len(items) != 1 {
			t.Fatalf("items: %v %v", items, err)
		}
		path := "/console/reconciliation/items/" + strconv.FormatInt(items[0].ID, 10) + "/resolve"
		form := url.Values{"csrf": {c.csrf(t)}, "key": {field(t, keyField, queue.body)}, "note": {"Alipay's fee, booked by hand"},
			"next": {"/console/queues/reconciliation"}}
		refused(t, e, c, path, form)
		if r := c.post(t, path, url.Values{"csrf": form["csrf"], "key": form["key"]}); r.status != http.StatusBadRequest {
			t.Fatalf("resolve without a note: %d", r.status)
		}
		postTwice(t, c, path, form, "/console/queues/reconciliation")
		items, _ = store.ReconItems(ctx, reconRunID(t, store, "2026-11-30"), model.ReconAmountDiffers, 10)
		if items[0].ResolvedAt == nil || items[0].ResolvedBy != "alice" || items[0].Note != "Alipay's fee, booked by hand" {
			t.Fatalf("item after resolve: %+v", items[0])
		}
		rows := actions(t, store, model.AuditReconResolve)
		if len(rows) != 1 || rows[0].OrderID == nil || rows[0].Before != "AMOUNT_DIFFERS of 2026-11-30, open" {
			t.Fatalf("audit: %+v", rows)
		}
		mustContain(t, c.mustGet(t, "/console/queues/reconciliation", http.StatusOK).body, "0 item(s) unresolved")
		mustContain(t, c.mustGet(t, "/console/orders/RC-1", http.StatusOK).body, "recon.resolve by alice")
		// In the audit log, the item's id leads to the items.
		mustContain(t, c.mustGet(t, "/console/audit", http.StatusOK).body,
			fmt.Sprintf(`recon_item <a href="/console/queues/reconciliation?all=1"><code class="id">%d</code></a>`, items[0].ID))
		if r := c.post(t, path, url.Values{"csrf": form["csrf"], "key": {strings.Repeat("b", 32)}, "note": {"again"}}); r.status != http.StatusConflict {
			t.Fatalf("resolve a resolved item: %d", r.status)
		}
		if r := c.post(t, "/console/reconciliation/items/999999/resolve", url.Values{"csrf": form["csrf"], "key": {strings.Repeat("b", 32)}, "note": {"x"}}); r.status != http.StatusNotFound {
			t.Fatalf("resolve a missing item: %d", r.status)
		}
	})
}

func reconRunID(tb testing.TB, store *dao.Store, date string) int64 {
	tb.Helper()
	run, err := store.ReconRun(tb.Context(), model.ProviderAlipay, date)
	if err != nil {
		tb.Fatal(err)
	}
	return run.ID
}

// The Reconciliation page lists every provider's runs and items, each
// naming its provider, and resolves a WeChat Pay item as it does Alipay's.
func TestReconQueueByProvider(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		ctx := t.Context()
		reconRun(t, store, "2026-11-29")
		run, attempt, err := store.ClaimRun(ctx, model.ProviderWechatpay, "2026-11-30", "test", time.Now(), time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.SaveItems(ctx, []model.ReconItem{{RunID: run.ID, AttemptNo: attempt, Outcome: model.ReconUnmatched,
			Ref: "4200000001202611300000000077", TradeNo: "4200000001202611300000000077", Detail: "WeChat Pay took it for no order"}}); err != nil {
			t.Fatal(err)
		}
		if err := store.FinishRun(ctx, run.ID, "test", attempt, dao.RunResult{State: model.ReconDone, Items: 1}, time.Now()); err != nil {
			t.Fatal(err)
		}
		c := e.signedIn(t, "alice")
		queue := c.mustGet(t, "/console/queues/reconciliation", http.StatusOK)
		// Newest date first: WeChat Pay's run of the 30th, then Alipay's of the 29th.
		mustContain(t, queue.body, "<td>WeChat Pay</td><td>2026-11-30</td><td><span class=\"badge done\"", "<td>Alipay</td><td>2026-11-29</td>",
			"<td>WeChat Pay</td><td>2026-11-30</td><td><span class=\"badge unmatched\"", "WeChat Pay took it for no order")
		if i, j := strings.Index(queue.body, "<td>WeChat Pay</td><td>2026-11-30</td>"), strings.Index(queue.body, "<td>Alipay</td><td>2026-11-29</td>"); i > j {
			t.Error("the runs are not newest date first")
		}
		items, err := store.ReconItems(ctx, run.ID, model.ReconUnmatched, 10)
		if err != nil || len(items) != 1 {
			t.Fatalf("items: %v %v", items, err)
		}
		path := "/console/reconciliation/items/" + strconv.FormatInt(items[0].ID, 10) + "/resolve"
		form := url.Values{"csrf": {c.csrf(t)}, "key": {field(t, keyField, queue.body)}, "note": {"refunded by hand"},
			"next": {"/console/queues/reconciliation"}}
		postTwice(t, c, path, form, "/console/queues/reconciliation")
		items, _ = store.ReconItems(ctx, run.ID, model.ReconUnmatched, 10)
		if items[0].ResolvedAt == nil || items[0].ResolvedBy != "alice" {
			t.Fatalf("item after resolve: %+v", items[0])
		}
	})
}
