package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/metrics"
	"paynotify/model"
	"paynotify/service"
)

// The last reconciled bill date is one series per configured provider,
// read from the runs (before the first DONE one, the day before the
// provider's first payment), and one not configured has no series at all
// (so no alert watches it).
func TestReconLastSuccessByProvider(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		ctx := t.Context()
		finish := func(p model.Provider, date string, state model.ReconState) {
			t.Helper()
			run, attempt, err := store.ClaimRun(ctx, model.BillAccount{Provider: p}, date, "test", time.Now(), time.Minute, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.FinishRun(ctx, run.ID, "test", attempt, dao.RunResult{State: state}, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		finish(model.ProviderAlipay, "2026-11-29", model.ReconDone)
		finish(model.ProviderAlipay, "2026-11-30", model.ReconFailed) // not a success: the 29th stays the last
		day := func(date string) string {
			d, err := service.ParseBillDate(date)
			if err != nil {
				t.Fatal(err)
			}
			return strconv.FormatFloat(float64(d.Unix()), 'g', -1, 64) // as the text format writes it
		}
		scrape := func(providers ...model.Provider) string {
			reg := prometheus.NewRegistry()
			m := metrics.New(reg)
			m.WatchState(store)
			var accounts []model.BillAccount
			for _, p := range providers {
				accounts = append(accounts, model.BillAccount{Provider: p})
			}
			m.BillAccounts(accounts)
			rec := httptest.NewRecorder()
			promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			return rec.Body.String()
		}
		const gauge = "paynotify_reconciliation_last_success_date"

		// WeChat Pay has no run that succeeded: with no payment of its
		// own, every day up to yesterday is as good as reconciled (a fresh
		// install is no missed run); with one, the day before its first.
		body := scrape(model.ProviderAlipay, model.ProviderWechatpay)
		for _, w := range []string{gauge + `{account="",provider="alipay"} ` + day("2026-11-29"), gauge + `{account="",provider="wechatpay"} ` + day(service.Yesterday(time.Now()))} {
			if !strings.Contains(body, w+"\n") {
				t.Errorf("/metrics lacks %q:\n%s", w, body)
			}
		}
		if _, err := store.SQL().Exec("INSERT INTO oms_order_payment (provider, trade_no, out_trade_no, amount, state, paid_at) VALUES ('wechatpay', 'W-FIRST', 'SN-FIRST', '1.00', 'UNMATCHED', ?)",
			time.Date(2026, 11, 20, 2, 0, 0, 0, time.UTC)); err != nil { // 10:00 on the 20th in Beijing
			t.Fatal(err)
		}
		if w := gauge + `{account="",provider="wechatpay"} ` + day("2026-11-19"); !strings.Contains(scrape(model.ProviderWechatpay), w+"\n") {
			t.Errorf("/metrics lacks %q", w)
		}

		finish(model.ProviderWechatpay, "2026-11-30", model.ReconDone)
		body = scrape(model.ProviderWechatpay)
		if w := gauge + `{account="",provider="wechatpay"} ` + day("2026-11-30"); !strings.Contains(body, w+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", w, body)
		}
		if strings.Contains(body, `provider="alipay"`) {
			t.Errorf("a WeChat Pay-only instance reports Alipay's reconciliation:\n%s", body)
		}

		// Items to look at, per provider: an open and a REPAIRED one of
		// Alipay's run, a resolved one of WeChat Pay's.
		for _, it := range []struct {
			p        model.Provider
			outcome  model.ReconOutcome
			resolved bool
		}{
			{model.ProviderAlipay, model.ReconUnmatched, false},
			{model.ProviderAlipay, model.ReconRepaired, false},
			{model.ProviderWechatpay, model.ReconAmountDiffers, true},
		} {
			q := "INSERT INTO recon_item (run_id, attempt_no, outcome, ref) SELECT id, 1, ?, ? FROM recon_run WHERE provider = ? AND bill_date = ?"
			date := map[model.Provider]string{model.ProviderAlipay: "2026-11-29", model.ProviderWechatpay: "2026-11-30"}[it.p]
			if it.resolved {
				q = "INSERT INTO recon_item (run_id, attempt_no, outcome, ref, resolved_at) SELECT id, 1, ?, ?, CURRENT_TIMESTAMP FROM recon_run WHERE provider = ? AND bill_date = ?"
			}
			if _, err := store.SQL().Exec(q, it.outcome, string(it.outcome), it.p, date); err != nil {
				t.Fatal(err)
			}
		}
		const open = "paynotify_reconciliation_unresolved_items"
		body = scrape(model.ProviderAlipay, model.ProviderWechatpay)
		for _, w := range []string{open + `{account="",provider="alipay"} 1`, open + `{account="",provider="wechatpay"} 0`} {
			if !strings.Contains(body, w+"\n") {
				t.Errorf("/metrics lacks %q:\n%s", w, body)
			}
		}
	})
}

// Two sellers of one provider are two series of each reconciliation
// gauge, read from each seller's runs alone: the first seller's date
// reconciled does not hide the second's missed one, nor its items.
func TestReconGaugesByAccount(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		ctx := t.Context()
		one := model.BillAccount{Provider: model.ProviderAlipay, Account: "2088000000000091", Legacy: true}
		two := model.BillAccount{Provider: model.ProviderAlipay, Account: "2088000000000092"}
		for _, r := range []struct {
			a     model.BillAccount
			date  string
			state model.ReconState
		}{{one, "2026-11-29", model.ReconDone}, {two, "2026-11-20", model.ReconDone}, {two, "2026-11-29", model.ReconFailed}} {
			run, attempt, err := store.ClaimRun(ctx, r.a, r.date, "test", time.Now(), time.Minute, nil)
			if err == nil {
				err = store.FinishRun(ctx, run.ID, "test", attempt, dao.RunResult{State: r.state}, time.Now())
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.a == two && r.state == model.ReconDone {
				if err := store.SaveItems(ctx, []model.ReconItem{{RunID: run.ID, AttemptNo: attempt, Outcome: model.ReconUnmatched, Ref: "T-92", TradeNo: "T-92"}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		reg := prometheus.NewRegistry()
		m := metrics.New(reg)
		m.WatchState(store)
		m.BillAccounts([]model.BillAccount{one, two})
		rec := httptest.NewRecorder()
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		day := func(date string) string {
			d, err := service.ParseBillDate(date)
			if err != nil {
				t.Fatal(err)
			}
			return strconv.FormatFloat(float64(d.Unix()), 'g', -1, 64)
		}
		for _, w := range []string{
			`paynotify_reconciliation_last_success_date{account="2088000000000091",provider="alipay"} ` + day("2026-11-29"),
			`paynotify_reconciliation_last_success_date{account="2088000000000092",provider="alipay"} ` + day("2026-11-20"),
			`paynotify_reconciliation_unresolved_items{account="2088000000000091",provider="alipay"} 0`,
			`paynotify_reconciliation_unresolved_items{account="2088000000000092",provider="alipay"} 1`,
		} {
			if !strings.Contains(rec.Body.String(), w+"\n") {
				t.Errorf("/metrics lacks %q:\n%s", w, rec.Body)
			}
		}
	})
}
