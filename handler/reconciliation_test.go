package handler_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
)

// The reconciliation views: runs with counts and totals, a run's items by
// outcome, and an item resolved with a note — once; all behind the admin
// token and as the OpenAPI document says.
func TestReconciliationViews(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		c := newCashier(t, store)
		// Yesterday, Beijing: a payment Alipay settled that our ledger
		// lacks and whose order does not exist, and one our ledger has that
		// Alipay never settled.
		at := yesterdayNoon()
		date := at.In(model.Beijing).Format("2006-01-02")
		if _, err := store.SQL().Exec("INSERT INTO oms_order (order_sn, member_id, pay_amount) VALUES ('RV-FORGED', 1, '5.00')"); err != nil {
			t.Fatal(err)
		}
		paidAt := at.UTC()
		if _, _, err := c.recon.Payments().Observe(t.Context(), model.Observation{Provider: model.ProviderAlipay, Ref: "n", OutTradeNo: "RV-FORGED", TradeNo: "T-RV-FORGED", Amount: decimal.RequireFromString("5.00"), PaidAt: &paidAt}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.SQL().Exec("INSERT INTO oms_order (order_sn, member_id, pay_amount) VALUES ('RV-LOST', 1, '8.00')"); err != nil {
			t.Fatal(err)
		}
		c.fake.AddPaidTrade("RV-LOST", "T-RV-LOST", decimal.RequireFromString("8.00"), at)

		if status, body := c.get(t, "/admin/reconciliations/"+date, "Bearer "+payAdminToken); status != http.StatusNotFound {
			t.Fatalf("before any run: %d %s", status, body)
		}
		status, _, body := c.post(t, "/admin/reconciliations/"+date+"/run", "Bearer "+payAdminToken, "", "")
		if status != http.StatusOK {
			t.Fatalf("run: %d %s", status, body)
		}
		today := time.Now().In(model.Beijing).Format("2006-01-02")
		if status, _, body := c.post(t, "/admin/reconciliations/"+today+"/run", "Bearer "+payAdminToken, "", ""); status != http.StatusBadRequest {
			t.Fatalf("run of today, whose bill is not out: %d %s", status, body)
		}
		// Impossible dates are refused at the edge, before anything is
		// claimed or fetched.
		for _, d := range []string{"0000-01-01", "2004-11-30", time.Now().In(model.Beijing).AddDate(1, 0, 0).Format("2006-01-02")} {
			if status, _, body := c.post(t, "/admin/reconciliations/"+d+"/run", "Bearer "+payAdminToken, "", ""); status != http.StatusBadRequest {
				t.Errorf("run of %s: %d %s, want 400", d, status, body)
			}
			mustAudited(t, store, model.AuditReconRun, model.TargetReconRun, model.RunTarget(model.ProviderAlipay, "", d), 0)
		}
		// The run asked for is in admin_audit; the one refused is not.
		// The row says what was asked, never a state the run has left
		// (it is append-only: "→ RUNNING" would stay when the run is DONE).
		if asked := mustAudited(t, store, model.AuditReconRun, model.TargetReconRun, model.RunTarget(model.ProviderAlipay, "", date), 1); asked[0].After != model.AuditReconRunAsked {
			t.Errorf("recon.run audit row reads %q → %q, want %q", asked[0].Before, asked[0].After, model.AuditReconRunAsked)
		}
		mustAudited(t, store, model.AuditReconRun, model.TargetReconRun, model.RunTarget(model.ProviderAlipay, "", today), 0)

		var list struct {
			Reconciliations []struct {
				BillDate   string         `json:"bill_date"`
				State      string         `json:"state"`
				Counts     map[string]int `json:"counts"`
				Unresolved int            `json:"unresolved"`
				Bill       map[string]any `json:"bill"`
				Ledger     map[string]any `json:"ledger"`
			} `json:"reconciliations"`
		}
		c.mustGetJSON(t, "/admin/reconciliations", &list)
		if len(list.Reconciliations) != 1 {
			t.Fatalf("runs %+v", list)
		}
		r := list.Reconciliations[0]
		if r.BillDate != date || r.State != "DONE" || r.Counts["REPAIRED"] != 1 || r.Counts["MISSING_AT_PROVIDER"] != 1 ||
			r.Unresolved != 1 || r.Bill["payment_amount"] != "8.00" || r.Ledger["payment_amount"] != "13.00" {
			t.Fatalf("run %+v", r)
		}

		var detail struct {
			Items []struct {
				ID       int64  `json:"id"`
				Outcome  string `json:"outcome"`
				TradeNo  string `json:"trade_no"`
				Resolved bool   `json:"resolved"`
				Note     string `json:"note"`
			} `json:"items"`
		}
		c.mustGetJSON(t, "/admin/reconciliations/"+date+"?outcome=MISSING_AT_PROVIDER", &detail)
		if len(detail.Items) != 1 || detail.Items[0].TradeNo != "T-RV-FORGED" || detail.Items[0].Resolved {
			t.Fatalf("items %+v", detail)
		}
		// The name before migration 00013 still filters: an old script's.
		var legacy = detail
		c.mustGetJSON(t, "/admin/reconciliations/"+date+"?outcome=MISSING_AT_ALIPAY", &legacy)
		if len(legacy.Items) != 1 || legacy.Items[0].Outcome != "MISSING_AT_PROVIDER" {
			t.Fatalf("?outcome=MISSING_AT_ALIPAY: items %+v", legacy)
		}
		id := strconv.FormatInt(detail.Items[0].ID, 10)
		path := "/admin/reconciliations/" + date + "/items/" + id + "/resolve"

		for _, bad := range []struct{ auth, body string }{{"", `{"note":"x"}`}, {"Bearer " + payAdminToken, `{"note":""}`}} {
			if status, _, body := c.post(t, path, bad.auth, "", bad.body); status != http.StatusUnauthorized && status != http.StatusBadRequest {
				t.Fatalf("resolve %q: %d %s", bad.body, status, body)
			}
		}
		// One note limit (model.MaxNote characters), refused with a
		// message naming it and nothing recorded; a note at the limit —
		// Chinese, three bytes a character — kept whole on the item and in
		// admin_audit alike.
		tooLong := strings.Repeat("n", model.MaxNote+1)
		if status, _, body := c.post(t, path, "Bearer "+payAdminToken, "", `{"note":"`+tooLong+`"}`); status != http.StatusBadRequest ||
			!strings.Contains(string(body), fmt.Sprintf("at most %d", model.MaxNote)) {
			t.Fatalf("a note of %d characters: %d %s", model.MaxNote+1, status, body)
		}
		note := "forged: reported to Alipay " + strings.Repeat("款", model.MaxNote-len("forged: reported to Alipay "))
		status, _, body = c.post(t, path, "Bearer "+payAdminToken, "", `{"note":"`+note+`","operator":"ops-ann"}`)
		if status != http.StatusOK {
			t.Fatalf("resolve: %d %s", status, body)
		}
		status, _, body = c.post(t, path, "Bearer "+payAdminToken, "", `{"note":"again","operator":"ops-bob"}`)
		var item struct {
			Resolved   bool   `json:"resolved"`
			ResolvedBy string `json:"resolved_by"`
			Note       string `json:"note"`
		}
		if err := json.Unmarshal(body, &item); status != http.StatusOK || err != nil || !item.Resolved || item.ResolvedBy != "ops-ann" ||
			item.Note != note {
			t.Fatalf("second resolve: %d %s", status, body)
		}
		// Resolved once, so recorded once: by the token's holder, as
		// the operator it named.
		if a := mustAudited(t, store, model.AuditReconResolve, model.TargetReconItem, id, 1)[0]; a.After != "resolved by ops-ann" ||
			a.Note != note {
			t.Fatalf("resolution audited as %+v", a)
		}
		if status, _, body := c.post(t, "/admin/reconciliations/"+date+"/items/99999/resolve", "Bearer "+payAdminToken, "", `{"note":"x"}`); status != http.StatusNotFound {
			t.Fatalf("unknown item: %d %s", status, body)
		}
		if status, body := c.get(t, "/admin/reconciliations/2026-13-45", "Bearer "+payAdminToken); status != http.StatusBadRequest {
			t.Fatalf("bad date: %d %s", status, body)
		}
		if status, body := c.get(t, "/admin/reconciliations", ""); status != http.StatusUnauthorized {
			t.Fatalf("no token: %d %s", status, body)
		}
	})
}

// POST /admin/payments/{trade_no}/refund: an UNMATCHED payment goes to the
// refund worker once per key; anything else is refused as the document
// says.
func TestRefundUnmatchedRoute(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		c := newCashier(t, store)
		at := time.Now().UTC()
		if _, outcome, err := c.recon.Payments().Observe(t.Context(), model.Observation{Provider: model.ProviderAlipay, Ref: "n", OutTradeNo: "NO-ORDER-1", TradeNo: "T-NO-ORDER-1", Amount: decimal.RequireFromString("9.90"), PaidAt: &at}); err != nil || outcome != model.OutcomeUnmatched {
			t.Fatalf("observe: %s %v", outcome, err)
		}
		path := "/admin/payments/T-NO-ORDER-1/refund"
		if status, _, body := c.post(t, path, "", "k1", ""); status != http.StatusUnauthorized {
			t.Fatalf("no token: %d %s", status, body)
		}
		if status, _, body := c.post(t, path, "Bearer "+payAdminToken, "", ""); status != http.StatusBadRequest {
			t.Fatalf("no key: %d %s", status, body)
		}
		for range 2 {
			status, _, body := c.post(t, path, "Bearer "+payAdminToken, "k1", "")
			var p struct {
				TradeNo, State, Amount string
			}
			if err := json.Unmarshal(body, &p); status != http.StatusAccepted || err != nil || p.State != "REFUND_PENDING" || p.Amount != "9.90" {
				t.Fatalf("refund: %d %s", status, body)
			}
		}
		if status, _, body := c.post(t, path, "Bearer "+payAdminToken, "k2", ""); status != http.StatusConflict {
			t.Fatalf("another key: %d %s", status, body)
		}
		// Moved once, recorded once.
		mustAudited(t, store, model.AuditPaymentRefund, model.TargetPayment, "T-NO-ORDER-1", 1)
		if status, _, body := c.post(t, "/admin/payments/T-NONE/refund", "Bearer "+payAdminToken, "k1", ""); status != http.StatusNotFound {
			t.Fatalf("no payment: %d %s", status, body)
		}
	})
}

// POST /admin/payments/{provider}/{trade_no}/refund: the same for any
// provider's payment; the form without a provider is Alipay's only.
func TestRefundUnmatchedRouteByProvider(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		c := newCashier(t, store)
		at := time.Now().UTC()
		if _, outcome, err := c.recon.Payments().Observe(t.Context(), model.Observation{Provider: model.ProviderWechatpay, Ref: "wx-n",
			OutTradeNo: "NO-ORDER-WX", TradeNo: "4200000001202612010000000001", Amount: decimal.RequireFromString("9.90"), PaidAt: &at}); err != nil || outcome != model.OutcomeUnmatched {
			t.Fatalf("observe: %s %v", outcome, err)
		}
		if status, _, body := c.post(t, "/admin/payments/4200000001202612010000000001/refund", "Bearer "+payAdminToken, "k1", ""); status != http.StatusNotFound {
			t.Fatalf("WeChat Pay's payment by the Alipay form: %d %s", status, body)
		}
		if status, _, body := c.post(t, "/admin/payments/paypal/4200000001202612010000000001/refund", "Bearer "+payAdminToken, "k1", ""); status != http.StatusNotFound {
			t.Fatalf("unknown provider: %d %s", status, body)
		}
		status, _, body := c.post(t, "/admin/payments/wechatpay/4200000001202612010000000001/refund", "Bearer "+payAdminToken, "k1", "")
		var p struct {
			Provider, TradeNo, State string
		}
		if err := json.Unmarshal(body, &p); status != http.StatusAccepted || err != nil || p.State != "REFUND_PENDING" || p.Provider != "wechatpay" {
			t.Fatalf("refund: %d %s", status, body)
		}
	})
}

// Each provider's reconciliation under /admin/reconciliations/{provider}/…,
// Alipay's also under the routes without one: the list shows both
// providers' runs (or one provider's, asked), a run and its items are read
// and resolved by provider, and an item of one provider's run is not found
// under the other's.
func TestReconciliationViewsByProvider(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		c := newCashier(t, store)
		auth := "Bearer " + payAdminToken
		// Yesterday, Beijing: a WeChat Pay payment our ledger has that
		// WeChat Pay's (empty) bill lacks.
		at := yesterdayNoon()
		date := at.In(model.Beijing).Format("2006-01-02")
		if _, err := store.SQL().Exec("INSERT INTO oms_order (order_sn, member_id, pay_amount) VALUES ('RV-WX', 1, '6.00')"); err != nil {
			t.Fatal(err)
		}
		paidAt := at.UTC()
		if _, _, err := c.wxRecon.Payments().Observe(t.Context(), model.Observation{Provider: model.ProviderWechatpay, Ref: "n", OutTradeNo: "RV-WX",
			TradeNo: "4200000001202612010000000042", Amount: decimal.RequireFromString("6.00"), PaidAt: &paidAt}); err != nil {
			t.Fatal(err)
		}

		var run struct {
			Provider string         `json:"provider"`
			BillDate string         `json:"bill_date"`
			State    string         `json:"state"`
			Counts   map[string]int `json:"counts"`
		}
		status, _, body := c.post(t, "/admin/reconciliations/wechatpay/"+date+"/run", auth, "", "")
		if err := json.Unmarshal(body, &run); status != http.StatusOK || err != nil || run.Provider != "wechatpay" || run.State != "DONE" ||
			run.Counts["MISSING_AT_PROVIDER"] != 1 {
			t.Fatalf("WeChat Pay's run: %d %s", status, body)
		}
		// Alipay's day is not run yet, under either of its routes.
		for _, path := range []string{"/admin/reconciliations/" + date, "/admin/reconciliations/alipay/" + date} {
			if status, body := c.get(t, path, auth); status != http.StatusNotFound {
				t.Fatalf("%s before Alipay's run: %d %s", path, status, body)
			}
		}
		status, _, body = c.post(t, "/admin/reconciliations/alipay/"+date+"/run", auth, "", "")
		if err := json.Unmarshal(body, &run); status != http.StatusOK || err != nil || run.Provider != "alipay" || run.Counts["MISSING_AT_PROVIDER"] != 0 {
			t.Fatalf("Alipay's run: %d %s", status, body)
		}

		type list struct {
			Reconciliations []struct {
				Provider string `json:"provider"`
				BillDate string `json:"bill_date"`
			} `json:"reconciliations"`
		}
		var all, wx, ali list
		c.mustGetJSON(t, "/admin/reconciliations", &all)
		if len(all.Reconciliations) != 2 || all.Reconciliations[0].Provider != "alipay" || all.Reconciliations[1].Provider != "wechatpay" ||
			all.Reconciliations[1].BillDate != date {
			t.Fatalf("every provider's runs: %+v", all)
		}
		c.mustGetJSON(t, "/admin/reconciliations?provider=wechatpay", &wx)
		c.mustGetJSON(t, "/admin/reconciliations?provider=alipay&limit=5", &ali)
		if len(wx.Reconciliations) != 1 || wx.Reconciliations[0].Provider != "wechatpay" || len(ali.Reconciliations) != 1 || ali.Reconciliations[0].Provider != "alipay" {
			t.Fatalf("one provider's runs: %+v %+v", wx, ali)
		}
		c.mustGetJSON(t, "/admin/reconciliations?limit=1", &all)
		if len(all.Reconciliations) != 1 {
			t.Fatalf("limit 1: %+v", all)
		}
		if status, body := c.get(t, "/admin/reconciliations?provider=paypal", auth); status != http.StatusBadRequest {
			t.Fatalf("unknown provider: %d %s", status, body)
		}

		var detail struct {
			Reconciliation struct {
				Provider string `json:"provider"`
			} `json:"reconciliation"`
			Items []struct {
				ID      int64  `json:"id"`
				TradeNo string `json:"trade_no"`
			} `json:"items"`
		}
		c.mustGetJSON(t, "/admin/reconciliations/wechatpay/"+date+"?outcome=MISSING_AT_PROVIDER", &detail)
		if detail.Reconciliation.Provider != "wechatpay" || len(detail.Items) != 1 || detail.Items[0].TradeNo != "4200000001202612010000000042" {
			t.Fatalf("WeChat Pay's run: %+v", detail)
		}
		id := strconv.FormatInt(detail.Items[0].ID, 10)
		c.mustGetJSON(t, "/admin/reconciliations/"+date, &detail)
		if detail.Reconciliation.Provider != "alipay" {
			t.Fatalf("the route without a provider read %+v, want Alipay's", detail)
		}
		if status, body := c.get(t, "/admin/reconciliations/paypal/"+date, auth); status != http.StatusNotFound {
			t.Fatalf("unknown provider's run: %d %s", status, body)
		}

		// WeChat Pay's item is not Alipay's, under either of its routes.
		for _, path := range []string{"/admin/reconciliations/" + date + "/items/" + id + "/resolve", "/admin/reconciliations/alipay/" + date + "/items/" + id + "/resolve"} {
			if status, _, body := c.post(t, path, auth, "", `{"note":"x"}`); status != http.StatusNotFound {
				t.Fatalf("%s: %d %s", path, status, body)
			}
		}
		mustAudited(t, store, model.AuditReconResolve, model.TargetReconItem, id, 0)
		status, _, body = c.post(t, "/admin/reconciliations/wechatpay/"+date+"/items/"+id+"/resolve", auth, "", `{"note":"refunded by hand","operator":"ops-ann"}`)
		var item struct {
			Resolved   bool   `json:"resolved"`
			ResolvedBy string `json:"resolved_by"`
		}
		if err := json.Unmarshal(body, &item); status != http.StatusOK || err != nil || !item.Resolved || item.ResolvedBy != "ops-ann" {
			t.Fatalf("resolve WeChat Pay's item: %d %s", status, body)
		}
		mustAudited(t, store, model.AuditReconResolve, model.TargetReconItem, id, 1)
	})
}

// yesterdayNoon is noon of yesterday in Beijing: a payment time well inside
// yesterday's bill, whatever the hour the test runs (a time near Beijing's
// midnight may belong to the next day's bill and is not reported missing).
func yesterdayNoon() time.Time {
	y := time.Now().In(model.Beijing).AddDate(0, 0, -1)
	return time.Date(y.Year(), y.Month(), y.Day(), 12, 0, 0, 0, model.Beijing)
}
