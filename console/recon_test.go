package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/console"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
	"paynotify/service"
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

// reconRun records a finished reconciliation of Alipay's bill of date with
// items, as a run does.
func reconRun(tb testing.TB, store *dao.Store, date string, items ...model.ReconItem) model.ReconRun {
	tb.Helper()
	return providerRun(tb, store, model.ProviderAlipay, date, items...)
}

// providerRun records a finished reconciliation of provider's bill of
// date with items, as a run does.
func providerRun(tb testing.TB, store *dao.Store, provider model.Provider, date string, items ...model.ReconItem) model.ReconRun {
	tb.Helper()
	ctx := tb.Context()
	run, attempt, err := store.ClaimRun(ctx, model.BillAccount{Provider: provider}, date, "test", time.Now(), time.Minute, nil)
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
	run, err = store.ReconRun(ctx, model.BillAccount{Provider: provider}, date)
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
	run, err := store.ReconRun(tb.Context(), model.BillAccount{Provider: model.ProviderAlipay}, date)
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
		run, attempt, err := store.ClaimRun(ctx, model.BillAccount{Provider: model.ProviderWechatpay}, "2026-11-30", "test", time.Now(), time.Minute, nil)
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
		wxRun, aliRun := `<td>WeChat Pay</td><td><a href="/console/reconciliations/wechatpay/2026-11-30">2026-11-30</a></td>`,
			`<td>Alipay</td><td><a href="/console/reconciliations/alipay/2026-11-29">2026-11-29</a></td>`
		mustContain(t, queue.body, wxRun+`<td><span class="badge done"`, aliRun,
			wxRun+`<td><span class="badge unmatched"`, "WeChat Pay took it for no order")
		if i, j := strings.Index(squash(queue.body), wxRun), strings.Index(squash(queue.body), aliRun); i > j {
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

// The overview shows each configured provider's latest run, linked to its
// page; a provider not configured is not shown.
func TestReconOverviewByProvider(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		// Before any run, each configured provider says so.
		mustContain(t, newEnv(t, store).signedIn(t, "alice").mustGet(t, "/console/", http.StatusOK).body,
			"<li>Alipay: none yet.</li>", "<li>WeChat Pay: none yet.</li>")

		providerRun(t, store, model.ProviderAlipay, "2026-11-28")
		providerRun(t, store, model.ProviderAlipay, "2026-11-29")
		providerRun(t, store, model.ProviderWechatpay, "2026-11-30",
			model.ReconItem{Outcome: model.ReconMissingAtProvider, Ref: "4200000001202611300000000001", TradeNo: "4200000001202611300000000001"})

		c := newEnv(t, store).signedIn(t, "alice")
		ov := c.mustGet(t, "/console/", http.StatusOK)
		ali := `<li>Alipay: <a href="/console/reconciliations/alipay/2026-11-29">2026-11-29</a><span class="badge done" title="DONE">done</span>, 0 unresolved</li>`
		wx := `<li>WeChat Pay: <a href="/console/reconciliations/wechatpay/2026-11-30">2026-11-30</a><span class="badge done" title="DONE">done</span>, 1 unresolved</li>`
		mustContain(t, ov.body, ali, wx)
		if strings.Contains(ov.body, "2026-11-28") {
			t.Error("the overview shows a run older than Alipay's latest")
		}

		// WeChat Pay only: its run, and no word of Alipay's.
		c = newEnv(t, store, configured(model.ProviderWechatpay)).signedIn(t, "alice")
		ov = c.mustGet(t, "/console/", http.StatusOK)
		mustContain(t, ov.body, wx)
		if strings.Contains(squash(ov.body), "<li>Alipay:") {
			t.Error("a WeChat Pay-only console shows Alipay's reconciliation")
		}
	})
}

// On a WeChat Pay-only console (no Alipay reconciler), a WeChat Pay item
// is resolved through WeChat Pay's reconciler, audited against its order;
// an Alipay item is refused with a sentence, and nothing changes.
func TestReconResolveWeChatPayOnly(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store, configured(model.ProviderWechatpay))
		ctx := t.Context()
		order := mustOrder(t, store, "WX-RC-1", 1, "18.00")
		tradeNo := "4200000001202611300000000042"
		paidAt := time.Now().UTC().Truncate(time.Second)
		if _, _, err := e.payments.Observe(ctx, model.Observation{Provider: model.ProviderWechatpay, Ref: "n-" + tradeNo, OutTradeNo: "WX-RC-1",
			TradeNo: tradeNo, Amount: decimal.RequireFromString("18.00"), PaidAt: &paidAt}); err != nil {
			t.Fatal(err)
		}
		wx := providerRun(t, store, model.ProviderWechatpay, "2026-11-30",
			model.ReconItem{Outcome: model.ReconMissingAtProvider, Ref: tradeNo, TradeNo: tradeNo, OutTradeNo: "WX-RC-1", Detail: "not in WeChat Pay's bill"})
		ali := providerRun(t, store, model.ProviderAlipay, "2026-11-30",
			model.ReconItem{Outcome: model.ReconUnknownRefund, Ref: "R-ALI-1", OutRequestNo: "R-ALI-1", Detail: "a refund made at Alipay"})
		wxItem, aliItem := itemOf(t, store, wx), itemOf(t, store, ali)

		c := e.signedIn(t, "alice")
		queue := c.mustGet(t, "/console/queues/reconciliation", http.StatusOK)
		// Only the WeChat Pay item offers the action.
		mustContain(t, queue.body, fmt.Sprintf(`action="/console/reconciliation/items/%d/resolve"`, wxItem.ID))
		if strings.Contains(queue.body, fmt.Sprintf(`action="/console/reconciliation/items/%d/resolve"`, aliItem.ID)) {
			t.Error("an Alipay item offers resolve on a console without Alipay")
		}
		key := field(t, keyField, queue.body)

		path := fmt.Sprintf("/console/reconciliation/items/%d/resolve", wxItem.ID)
		form := url.Values{"csrf": {c.csrf(t)}, "key": {key}, "note": {"WeChat Pay's bill of the 1st has it"}, "next": {"/console/queues/reconciliation"}}
		postTwice(t, c, path, form, "/console/queues/reconciliation")
		if got := itemOf(t, store, wx); got.ResolvedAt == nil || got.ResolvedBy != "alice" || got.Note != "WeChat Pay's bill of the 1st has it" {
			t.Fatalf("item after resolve: %+v", got)
		}
		rows := actions(t, store, model.AuditReconResolve)
		if len(rows) != 1 || rows[0].Operator != "alice" || rows[0].TargetID != strconv.FormatInt(wxItem.ID, 10) ||
			rows[0].Before != "MISSING_AT_PROVIDER of 2026-11-30, open" || rows[0].OrderID == nil || *rows[0].OrderID != order.ID {
			t.Fatalf("audit: %+v", rows)
		}

		// Alipay's item: refused, and neither the item nor the audit moves.
		path = fmt.Sprintf("/console/reconciliation/items/%d/resolve", aliItem.ID)
		r := c.post(t, path, url.Values{"csrf": form["csrf"], "key": {strings.Repeat("c", 32)}, "note": {"done at Alipay"}})
		if r.status != http.StatusUnprocessableEntity {
			t.Fatalf("resolve an item of a provider not configured: %d", r.status)
		}
		mustContain(t, r.body, fmt.Sprintf("item %d is Alipay&#39;s; resolve it on an instance configured for Alipay", aliItem.ID))
		if got := itemOf(t, store, ali); got.ResolvedAt != nil {
			t.Fatalf("the refused resolve resolved the item: %+v", got)
		}
		if n := len(actions(t, store, model.AuditReconResolve)); n != 1 {
			t.Fatalf("%d resolutions audited", n)
		}
	})
}

// itemOf is run's one item.
func itemOf(tb testing.TB, store *dao.Store, run model.ReconRun) model.ReconItem {
	tb.Helper()
	items, err := store.ReconItems(tb.Context(), run.ID, "", 10)
	if err != nil || len(items) != 1 {
		tb.Fatalf("items of run %d: %v %v", run.ID, items, err)
	}
	return items[0]
}

// The page of one provider's run of one date: its summary, attempts and
// items with their actions, for either provider; bad input is refused
// with a sentence.
func TestReconRunPage(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		bill, ledger := decimal.RequireFromString("29.00"), decimal.RequireFromString("30.00")
		ali := providerRun(t, store, model.ProviderAlipay, "2026-11-30",
			model.ReconItem{Outcome: model.ReconAmountDiffers, Ref: "T-RUN-1", TradeNo: "T-RUN-1", BillAmount: &bill, LedgerAmount: &ledger, Detail: "the bill says 29.00"},
			model.ReconItem{Outcome: model.ReconRepaired, Ref: "T-RUN-2", TradeNo: "T-RUN-2", Detail: "recorded from the bill as APPLIED"})
		wx := providerRun(t, store, model.ProviderWechatpay, "2026-11-30",
			model.ReconItem{Outcome: model.ReconUnmatched, Ref: "4200000001202611300000000077", TradeNo: "4200000001202611300000000077", Detail: "WeChat Pay took it for no order"})
		c := newEnv(t, store).signedIn(t, "alice")

		page := c.mustGet(t, "/console/reconciliations/alipay/2026-11-30", http.StatusOK)
		mustContain(t, page.body, "<h1>Alipay's bill of 2026-11-30</h1>", `<dt>state</dt><dd><span class="badge done" title="DONE">done</span></dd>`,
			"<dt>attempts</dt><dd>1</dd>", "<dt>needs a look</dt><dd>1</dd>", `<span title="AMOUNT_DIFFERS">amount differs</span> 1<br><span title="REPAIRED">repaired</span> 1<br>`,
			// The attempt, and both items.
			`<td class="num">1</td><td><code class="id">test</code></td>`, "2 item(s).", "the bill says 29.00", "29.00 CNY", "T-RUN-2",
			fmt.Sprintf(`action="/console/reconciliation/items/%d/resolve"`, itemIDs(t, store, ali)[0]))
		if strings.Contains(page.body, "WeChat Pay took it") {
			t.Error("Alipay's run page lists WeChat Pay's item")
		}
		// One outcome.
		one := c.mustGet(t, "/console/reconciliations/alipay/2026-11-30?outcome=REPAIRED", http.StatusOK)
		mustContain(t, one.body, "1 item(s).", "T-RUN-2")
		if strings.Contains(one.body, "T-RUN-1") {
			t.Error("the REPAIRED tab lists an AMOUNT_DIFFERS item")
		}

		page = c.mustGet(t, "/console/reconciliations/wechatpay/2026-11-30", http.StatusOK)
		mustContain(t, page.body, "<h1>WeChat Pay's bill of 2026-11-30</h1>", "WeChat Pay took it for no order", "1 item(s).",
			fmt.Sprintf(`action="/console/reconciliation/items/%d/resolve"`, itemIDs(t, store, wx)[0]))
		if strings.Contains(page.body, "T-RUN-1") {
			t.Error("WeChat Pay's run page lists Alipay's item")
		}
		// The runs list links to each.
		mustContain(t, c.mustGet(t, "/console/queues/reconciliation", http.StatusOK).body,
			`href="/console/reconciliations/alipay/2026-11-30"`, `href="/console/reconciliations/wechatpay/2026-11-30"`)

		for _, bad := range []struct {
			path   string
			status int
			says   string
		}{
			{"/console/reconciliations/paypal/2026-11-30", http.StatusNotFound, "No such provider"},
			{"/console/reconciliations/alipay/2026-11-31", http.StatusBadRequest, "A bill date is written yyyy-MM-dd"},
			{"/console/reconciliations/alipay/30-11-2026", http.StatusBadRequest, "A bill date is written yyyy-MM-dd"},
			{"/console/reconciliations/wechatpay/2026-11-29", http.StatusNotFound, "WeChat Pay&#39;s bill of 2026-11-29 has not been reconciled"},
			{"/console/reconciliations/alipay/2026-11-30?outcome=BOGUS", http.StatusBadRequest, "Unknown reconciliation outcome."},
		} {
			mustContain(t, c.mustGet(t, bad.path, bad.status).body, bad.says)
		}
	})
}

// itemIDs are the ids of run's items, in the order it found them.
func itemIDs(tb testing.TB, store *dao.Store, run model.ReconRun) []int64 {
	tb.Helper()
	items, err := store.ReconItems(tb.Context(), run.ID, "", 100)
	if err != nil {
		tb.Fatal(err)
	}
	ids := make([]int64, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	return ids
}

// A day's fees are the run's: on the run's page and beside the run in the
// outbox, never on the timeline of the order whose id is the run's; an
// event of no order names none.
func TestRunFeesOnTheRun(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		e := newEnv(t, store)
		ctx := t.Context()
		o := mustOrder(t, store, "FEE-1", 1, "30.00")
		e.pay(t, "FEE-1", "T-FEE-1", "30.00")
		e.pay(t, "GONE-78", "T-FEE-2", "5.00") // payment.unmatched: no order
		run := reconRun(t, store, "2026-11-30")
		if run.ID != o.ID {
			t.Fatalf("the test needs a run whose id is an order's: run %d, order %d", run.ID, o.ID)
		}
		fee := model.Event{ID: "0190a000-0000-7000-8000-00000000fee1", Type: model.EventFeesBooked, AggregateID: run.ID,
			OccurredAt: time.Now().UTC().Truncate(time.Millisecond),
			Data:       []byte(`{"provider":"alipay","bill_date":"2026-11-30","lines":3,"amount":"1.97"}`)}
		if err := store.UpdateOutbox(ctx, func(ctx context.Context, tx *dao.OutboxTx) error { return tx.InsertEvents(ctx, fee) }); err != nil {
			t.Fatal(err)
		}
		c := e.signedIn(t, "alice")
		tl := c.mustGet(t, "/console/orders/FEE-1", http.StatusOK)
		mustContain(t, tl.body, "Event order.paid")
		if strings.Contains(tl.body, "fees_booked") || strings.Contains(tl.body, "1.97") {
			t.Errorf("the order's timeline shows the day's fees:\n%s", squash(tl.body))
		}
		rp := c.mustGet(t, "/console/reconciliations/alipay/2026-11-30", http.StatusOK)
		mustContain(t, rp.body, "<h2>Fees booked</h2>", `<td class="num">3</td><td class="num">1.97</td>`)
		ob := c.mustGet(t, "/console/queues/outbox?state=PENDING", http.StatusOK)
		mustContain(t, ob.body, `<td>payment.fees_booked</td><td><a href="/console/reconciliations/alipay/2026-11-30">reconciliation of 2026-11-30</a></td>`,
			`<td>payment.unmatched</td><td><span class="hint">none</span></td>`,
			`<td>order.paid</td><td><a href="/console/orders/FEE-1">`)
		if strings.Contains(ob.body, "<td>0</td>") {
			t.Errorf("the outbox names order 0:\n%s", squash(ob.body))
		}
	})
}

// Run this day: an operator reconciles a provider's day from the
// Reconciliation page, once per form, with the ask in admin_audit naming
// the provider's run.
func TestRunThisDay(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		noBusiness := func(d *console.Deps) {
			r := service.NewBillReconciler(store, service.BillSourceFunc(func(context.Context, time.Time) (model.Bill, error) {
				return nil, model.ErrNoBill
			}), service.NewPayments(store), d.Log)
			r.Provider = model.ProviderWechatpay
			d.BillReconcilers = service.Reconcilers{model.ProviderWechatpay: {r}}
		}
		e := newEnv(t, store, noBusiness)
		c := e.signedIn(t, "alice")
		page := c.mustGet(t, "/console/queues/reconciliation", http.StatusOK)
		mustContain(t, page.body, "Run this day: WeChat Pay")
		path := "/console/reconciliations/wechatpay/2026-11-30/run"
		form := url.Values{"csrf": {c.csrf(t)}, "key": {field(t, keyField, page.body)}, "date": {"2026-11-30"}}
		refused(t, e, c, path, form)
		if _, err := store.ReconRun(t.Context(), model.BillAccount{Provider: model.ProviderWechatpay}, "2026-11-30"); err == nil {
			t.Fatal("a refused post ran the day")
		}
		postTwice(t, c, path, form, "/console/reconciliations/wechatpay/2026-11-30")
		run, err := store.ReconRun(t.Context(), model.BillAccount{Provider: model.ProviderWechatpay}, "2026-11-30")
		if err != nil || run.State != model.ReconDone || run.Attempts != 1 {
			t.Fatalf("the run: %+v %v, want DONE after one attempt", run, err)
		}
		rows := actions(t, store, model.AuditReconRun)
		if len(rows) != 1 || rows[0].Operator != "alice" || rows[0].TargetID != "wechatpay/2026-11-30" {
			t.Fatalf("audit: %+v", rows)
		}
		mustContain(t, c.mustGet(t, "/console/audit", http.StatusOK).body, `<a href="/console/reconciliations/wechatpay/2026-11-30"><code class="id">wechatpay/2026-11-30</code></a>`)
		// Alipay is not configured here: its day cannot be run.
		if r := c.post(t, "/console/reconciliations/alipay/2026-11-30/run", url.Values{"csrf": form["csrf"], "key": {strings.Repeat("b", 32)}}); r.status != http.StatusNotFound {
			t.Errorf("Alipay's day on a WeChat Pay-only console: %d", r.status)
		}
	})
}
