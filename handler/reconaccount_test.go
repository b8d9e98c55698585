package handler_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/handler"
	"paynotify/model"
	"paynotify/service"
)

// A provider of two accounts: every reconciliation route wants
// ?account=, and without it (or with an account the provider has not)
// answers 400 naming both; with it, the account's own run, which the list
// shows with its account — one run per account of one date.
func TestReconciliationRoutesTakeTheAccount(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		const one, two = "2088000000000071", "2088000000000072"
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		noBill := service.BillSourceFunc(func(context.Context, time.Time) (model.Bill, error) { return nil, model.ErrNoBill })
		var recons []*service.BillReconciler
		for i, account := range []string{one, two} {
			r := service.NewBillReconciler(store, noBill, service.NewPayments(store), log)
			r.Provider, r.Account, r.Accounts = model.ProviderAlipay, account, []string{account}
			if i == 0 {
				r.Accounts = []string{"", account}
			}
			recons = append(recons, r)
		}
		srv := httptest.NewServer(validated(t, handler.New(handler.Deps{
			Log: log, Registry: prometheus.NewRegistry(), AdminToken: payAdminToken, Dashboard: service.NewDashboard(store),
			Queues: service.NewQueues(store), Lookup: service.NewLookup(store),
			BillReconcilers: service.Reconcilers{model.ProviderAlipay: recons}, DB: store,
		})))
		t.Cleanup(srv.Close)
		do := func(method, path string) (int, string) {
			t.Helper()
			req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+payAdminToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		date := time.Now().In(model.Beijing).AddDate(0, 0, -1).Format(time.DateOnly)
		for _, path := range []string{"/admin/reconciliations/alipay/" + date + "/run", "/admin/reconciliations/" + date + "/run",
			"/admin/reconciliations/alipay/" + date + "/run?account=2088000000000099"} {
			code, body := do(http.MethodPost, path)
			if code != http.StatusBadRequest || !strings.Contains(body, one) || !strings.Contains(body, two) {
				t.Errorf("POST %s: %d %s, want 400 naming both accounts", path, code, body)
			}
		}
		if code, body := do(http.MethodGet, "/admin/reconciliations/alipay/"+date); code != http.StatusBadRequest {
			t.Errorf("GET a run without the account: %d %s", code, body)
		}
		var runs int
		if err := store.SQL().QueryRow("SELECT COUNT(*) FROM recon_run").Scan(&runs); err != nil || runs != 0 {
			t.Fatalf("%d runs claimed by refused asks (%v)", runs, err)
		}
		for _, account := range []string{two, one} {
			code, body := do(http.MethodPost, "/admin/reconciliations/alipay/"+date+"/run?account="+account)
			var v struct{ Account, State string }
			if err := json.Unmarshal([]byte(body), &v); err != nil || code != http.StatusOK || v.Account != account || v.State != string(model.ReconDone) {
				t.Errorf("run of %s: %d %s", account, code, body)
			}
			if code, body := do(http.MethodGet, "/admin/reconciliations/alipay/"+date+"?account="+account); code != http.StatusOK || !strings.Contains(body, `"account":"`+account+`"`) {
				t.Errorf("view of %s's run: %d %s", account, code, body)
			}
		}
		code, body := do(http.MethodGet, "/admin/reconciliations?provider=alipay")
		var list struct {
			Reconciliations []struct{ Account, BillDate string } `json:"reconciliations"`
		}
		if err := json.Unmarshal([]byte(body), &list); err != nil || code != http.StatusOK || len(list.Reconciliations) != 2 ||
			list.Reconciliations[0].Account != one || list.Reconciliations[1].Account != two {
			t.Errorf("list: %d %s, want the date's two runs, by account", code, body)
		}
		code, body = do(http.MethodGet, "/admin/reconciliations?provider=alipay&account="+two)
		if err := json.Unmarshal([]byte(body), &list); err != nil || code != http.StatusOK || len(list.Reconciliations) != 1 || list.Reconciliations[0].Account != two {
			t.Errorf("list of one account: %d %s", code, body)
		}
		if code, body := do(http.MethodGet, "/admin/reconciliations?account="+two); code != http.StatusBadRequest {
			t.Errorf("account without provider: %d %s, want 400", code, body)
		}
	})
}
