package handler_test

import (
	"encoding/json"
	"net/http"
	"strconv"
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
		at := time.Now().Add(-24 * time.Hour)
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
			mustAudited(t, store, model.AuditReconRun, model.TargetReconRun, d, 0)
		}
		// The run asked for is in admin_audit; the one refused is not.
		// The row says what was asked, never a state the run has left
		// (it is append-only: "→ RUNNING" would stay when the run is DONE).
		if asked := mustAudited(t, store, model.AuditReconRun, model.TargetReconRun, date, 1); asked[0].After != model.AuditReconRunAsked {
			t.Errorf("recon.run audit row reads %q → %q, want %q", asked[0].Before, asked[0].After, model.AuditReconRunAsked)
		}
		mustAudited(t, store, model.AuditReconRun, model.TargetReconRun, today, 0)

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
		id := strconv.FormatInt(detail.Items[0].ID, 10)
		path := "/admin/reconciliations/" + date + "/items/" + id + "/resolve"

		for _, bad := range []struct{ auth, body string }{{"", `{"note":"x"}`}, {"Bearer " + payAdminToken, `{"note":""}`}} {
			if status, _, body := c.post(t, path, bad.auth, "", bad.body); status != http.StatusUnauthorized && status != http.StatusBadRequest {
				t.Fatalf("resolve %q: %d %s", bad.body, status, body)
			}
		}
		status, _, body = c.post(t, path, "Bearer "+payAdminToken, "", `{"note":"forged: reported to Alipay","operator":"ops-ann"}`)
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
			item.Note != "forged: reported to Alipay" {
			t.Fatalf("second resolve: %d %s", status, body)
		}
		// Resolved once, so recorded once: by the token's holder, as
		// the operator it named.
		if a := mustAudited(t, store, model.AuditReconResolve, model.TargetReconItem, id, 1)[0]; a.After != "resolved by ops-ann" ||
			a.Note != "forged: reported to Alipay" {
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
