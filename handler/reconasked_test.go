package handler_test

import (
	"context"
	"encoding/json"
	"errors"
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

// A run that cannot end within its request — the bill is held past the
// request's deadline — is answered 202, RUNNING, with Location its view,
// and goes on to its end after the request, as that view then shows.
func TestReconciliationRunOutlivesItsRequest(t *testing.T) {
	store := daotest.Open(t, dao.DriverMySQL)
	release := make(chan struct{})
	bills := service.BillSourceFunc(func(ctx context.Context, day time.Time) (model.Bill, error) {
		select {
		case <-release:
			return nil, errors.New("no bill today")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	recon := service.NewBillReconciler(store, bills, service.NewPayments(store), log)
	recon.Background = t.Context()
	srv := httptest.NewServer(validated(t, handler.New(handler.Deps{
		Log: log, Registry: prometheus.NewRegistry(), AdminToken: payAdminToken, Dashboard: service.NewDashboard(store), Queues: service.NewQueues(store), Lookup: service.NewLookup(store),
		BillReconcilers: service.Reconcilers{model.ProviderAlipay: {recon}}, DB: store, APITimeout: 1500 * time.Millisecond,
	})))
	t.Cleanup(srv.Close)
	do := func(method, path string) (*http.Response, map[string]any) {
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
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return resp, body
	}

	date := time.Now().In(model.Beijing).AddDate(0, 0, -1).Format("2006-01-02")
	resp, body := do(http.MethodPost, "/admin/reconciliations/"+date+"/run")
	if resp.StatusCode != http.StatusAccepted || body["state"] != "RUNNING" || body["bill_date"] != date {
		t.Fatalf("run with the bill held: %d %v, want 202 RUNNING", resp.StatusCode, body)
	}
	view := resp.Header.Get("Location")
	if view != "/admin/reconciliations/"+date {
		t.Fatalf("Location %q", view)
	}
	close(release)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, body := do(http.MethodGet, view)
		run, _ := body["reconciliation"].(map[string]any)
		if resp.StatusCode != http.StatusOK || run == nil {
			t.Fatalf("view: %d %v", resp.StatusCode, body)
		}
		if run["state"] == "FAILED" {
			break
		}
		if run["state"] != "RUNNING" || time.Now().After(deadline) {
			t.Fatalf("after its request the run is %v, want it to end FAILED (no bill)", run["state"])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// With only WeChat Pay's reconciliation, Alipay's routes — with the
// provider or without — answer 422 provider_not_configured, and the list
// is WeChat Pay's.
func TestReconciliationOfAProviderNotConfigured(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		wx := service.NewBillReconciler(store, service.BillSourceFunc(func(context.Context, time.Time) (model.Bill, error) {
			return emptyBill{}, nil
		}), service.NewPayments(store), log)
		wx.Provider = model.ProviderWechatpay
		srv := httptest.NewServer(validated(t, handler.New(handler.Deps{
			Log: log, Registry: prometheus.NewRegistry(), AdminToken: payAdminToken, Dashboard: service.NewDashboard(store), Queues: service.NewQueues(store), Lookup: service.NewLookup(store),
			BillReconcilers: service.Reconcilers{model.ProviderWechatpay: {wx}}, DB: store,
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
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			return resp.StatusCode, string(b)
		}
		date := time.Now().In(model.Beijing).AddDate(0, 0, -1).Format("2006-01-02")
		if status, body := do(http.MethodPost, "/admin/reconciliations/wechatpay/"+date+"/run"); status != http.StatusOK {
			t.Fatalf("WeChat Pay's run: %d %s", status, body)
		}
		for _, r := range [][2]string{
			{http.MethodGet, "/admin/reconciliations/" + date}, {http.MethodGet, "/admin/reconciliations/alipay/" + date},
			{http.MethodPost, "/admin/reconciliations/" + date + "/run"}, {http.MethodPost, "/admin/reconciliations/alipay/" + date + "/run"},
			{http.MethodGet, "/admin/reconciliations?provider=alipay"},
		} {
			if status, body := do(r[0], r[1]); status != http.StatusUnprocessableEntity || !strings.Contains(body, "provider_not_configured") {
				t.Errorf("%s %s: %d %s, want 422 provider_not_configured", r[0], r[1], status, body)
			}
		}
		if status, body := do(http.MethodGet, "/admin/reconciliations"); status != http.StatusOK || !strings.Contains(body, `"provider":"wechatpay"`) ||
			strings.Contains(body, `"provider":"alipay"`) {
			t.Fatalf("the list: %d %s", status, body)
		}
	})
}
