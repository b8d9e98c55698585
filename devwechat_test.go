package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"paynotify/dao"
	"paynotify/fakewechatpay"
	"paynotify/handler"
	"paynotify/model"
)

// What QA does with WeChat Pay on a fresh clone: `go run . dev`, then
// replay every file in testdata/notify/wechatpay, each signed afresh as
// `sign -provider wechatpay` does. Each HTTP status, and the ledger at the
// end, is what the cases say: the same as Alipay's replay.
func TestDevReplaysWeChatPayTestdata(t *testing.T) {
	db := filepath.Join(t.TempDir(), "dev.db")
	// As TestDevReplaysTestdata: the payments owed back stay REFUND_PENDING.
	base, logs := start(t, []string{"dev", "-db", db, "-manual-refunds"}, []string{"ALIPAY_JOBS_INTERVAL=1h"})
	if !strings.Contains(logs.String(), "sign -provider wechatpay") {
		t.Errorf("dev does not print the WeChat Pay replay line:\n%s", logs)
	}
	// The loop as the docs write it: for f in
	// testdata/notify/wechatpay/*.json — the shell's order is the names'
	// order, which must be the cases' order.
	files, err := filepath.Glob(filepath.Join("testdata", "notify", "wechatpay", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	if len(files) != len(weChatCases) {
		t.Fatalf("%d replay files, %d cases", len(files), len(weChatCases))
	}
	for i, f := range files {
		c := weChatCases[i]
		if filepath.Base(f) != c.name+".json" {
			t.Fatalf("replay file %d is %s, want %s.json: the names' order is the replay order", i+1, f, c.name)
		}
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		status, answer := postWeChat(t, base+"/wechatpay/notify", bytes.TrimSpace(body), "wechatpay_private_key.pem", devWeChatPublicKeyID)
		if status != c.status {
			t.Errorf("%s: answer %d %s, want %d", c.name, status, answer, c.status)
		}
		if status == http.StatusNoContent && answer != "" {
			t.Errorf("%s: 204 with a body %q", c.name, answer)
		}
		if status >= 400 && !strings.Contains(answer, `"code":"FAIL"`) {
			t.Errorf("%s: %d answered %q, want {\"code\":\"FAIL\",…}", c.name, status, answer)
		}
	}
	// A signature probe, and a body signed by the platform certificate.
	probe := make(http.Header)
	probe.Set("Wechatpay-Signature", "WECHATPAY/SIGNTEST/abcdef")
	if status, _ := postWeChatHeaders(t, base+"/wechatpay/notify", []byte(`{}`), probe); status < 400 {
		t.Errorf("signature probe answered %d", status)
	}
	body, _ := os.ReadFile(filepath.Join("testdata", "notify", "wechatpay", "11_pay_demo_1004.json"))
	if status, answer := postWeChat(t, base+"/wechatpay/notify", bytes.TrimSpace(body), "wechatpay_platform_private_key.pem", devWeChatCertSerial); status != 204 {
		t.Errorf("resend by the platform certificate: %d %s", status, answer)
	}

	// Every refusal is a failure the failure-share alert sees, every 2xx
	// a success; the probe, no notification, is neither.
	failures, successes := 0, 1 // the platform certificate's resend
	for _, c := range weChatCases {
		if c.status >= 400 {
			failures++
		} else {
			successes++
		}
	}
	waitForMetrics(t, base, []string{
		fmt.Sprintf(`paynotify_notify_answers_total{answer="failure",provider="wechatpay"} %d`, failures),
		fmt.Sprintf(`paynotify_notify_answers_total{answer="success",provider="wechatpay"} %d`, successes),
		// 07 names a merchant, 08 an appid, this instance is not
		// configured for: the buyer paid somewhere, counted as such.
		`paynotify_notify_refused_total{provider="wechatpay",reason="unknown_app"} 2`,
	}, nil)
	for _, id := range []string{`mchid \"1900009999\"`, `appid \"wxd999999999999999\"`} {
		waitFor(t, "a WARN line naming "+id, func() bool { return strings.Contains(logs.String(), id) })
	}

	store, err := dao.Open(context.Background(), dao.DriverSQLite, db, dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	want := map[string]struct {
		status model.OrderStatus
		states []model.PaymentState
		app    string // the app its first payment is recorded in, if set
	}{
		"DEMO-1001": {model.OrderPaid, []model.PaymentState{model.PaymentApplied, model.PaymentRefundPending}, ""},
		"DEMO-1002": {model.OrderAwaitingPayment, []model.PaymentState{model.PaymentRefundPending}, ""},
		"DEMO-1003": {model.OrderClosed, []model.PaymentState{model.PaymentRefundPending}, ""},
		"DEMO-1004": {model.OrderPaid, []model.PaymentState{model.PaymentApplied}, ""},
		"DEMO-1006": {model.OrderPaid, []model.PaymentState{model.PaymentApplied}, devWeChatSecondAppID}, // the merchant's second appid
	}
	for sn, w := range want {
		o, err := store.Order(context.Background(), sn)
		if err != nil {
			t.Fatal(err)
		}
		pays, err := store.PaymentsByOrder(context.Background(), o.ID)
		if err != nil {
			t.Fatal(err)
		}
		var states []model.PaymentState
		for _, p := range pays {
			if p.Provider != model.ProviderWechatpay {
				t.Errorf("%s: a payment by %s", sn, p.Provider)
			}
			states = append(states, p.State)
		}
		if o.Status != w.status || len(states) != len(w.states) {
			t.Errorf("%s: status %d payments %v, want %d %v", sn, o.Status, states, w.status, w.states)
			continue
		}
		for i := range states {
			if states[i] != w.states[i] {
				t.Errorf("%s: payments %v, want %v", sn, states, w.states)
			}
		}
		if w.app != "" && pays[0].App != w.app {
			t.Errorf("%s: paid in app %q, want %q", sn, pays[0].App, w.app)
		}
	}
	reconcileDevDay(t, base, store)
}

// reconcileDevDay reconciles the replay files' day for both providers as
// dev's banner says, each against its fake's bill: every replayed WeChat
// payment, the second trade of DEMO-1001 too, matches its bill row; the
// payment each fake took for no order is found in the bill and recorded
// UNMATCHED, beside 10_unknown_order.json's (Alipay's replay files were not
// sent here).
func reconcileDevDay(t *testing.T, base string, store *dao.Store) {
	t.Helper()
	for _, c := range []struct {
		path, trade string
		unmatched   int
	}{
		{"/admin/reconciliations/2026-11-30/run", "20261130220014888800001099", 1},
		{"/admin/reconciliations/wechatpay/2026-11-30/run", devWeChatUnmatchedTrade, 2},
	} {
		req, _ := http.NewRequest(http.MethodPost, base+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+devAdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var run struct {
			Provider string         `json:"provider"`
			State    string         `json:"state"`
			Counts   map[string]int `json:"counts"`
			Bill     struct {
				Payments int `json:"payments"`
			} `json:"bill"`
		}
		err = json.NewDecoder(resp.Body).Decode(&run)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v", c.path, resp.StatusCode, err)
		}
		findings := 0
		for _, n := range run.Counts {
			findings += n
		}
		if run.State != "DONE" || run.Counts["UNMATCHED"] != c.unmatched || findings != c.unmatched {
			t.Errorf("%s: %+v, want DONE with %d UNMATCHED and nothing else", c.path, run, c.unmatched)
		}
		p, err := store.Payment(context.Background(), model.Provider(run.Provider), c.trade)
		if err != nil || p.State != model.PaymentUnmatched {
			t.Errorf("%s: the fake's payment for no order: %+v %v", c.path, p, err)
		}
	}
}

// A buyer pays a new order through dev's fake WeChat Pay: the pay request
// answers a code_url, its cashier's Pay button notifies, the order is paid.
func TestDevPaysThroughWeChatPay(t *testing.T) {
	db := filepath.Join(t.TempDir(), "dev.db")
	base, _ := start(t, []string{"dev", "-db", db}, []string{"ALIPAY_JOBS_INTERVAL=1h"})
	token, err := handler.MemberToken([]byte(devJWTSecret), 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	call := func(path, key, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		json.Unmarshal(b, &m)
		if resp.StatusCode >= 300 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		return m
	}
	order := call("/api/v1/orders", "wx-order-1", `{"items":[{"sku_id":1,"quantity":1}]}`)
	sn, _ := order["order_sn"].(string)
	if sn == "" {
		t.Fatalf("order %v", order)
	}
	pay := call("/api/v1/orders/"+sn+"/pay", "wx-pay-1", `{"provider":"wechatpay","method":"native"}`)
	codeURL, _ := pay["code_url"].(string)
	if codeURL == "" || pay["provider"] != "wechatpay" {
		t.Fatalf("pay answer %v", pay)
	}
	prepay := codeURL[strings.LastIndex(codeURL, "/")+1:]
	resp, err := http.PostForm(codeURL[:strings.LastIndex(codeURL, "/")]+"/pay", url.Values{"prepay_id": {prepay}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "paid") || strings.Contains(string(page), "alert") {
		t.Fatalf("cashier after Pay:\n%s", page)
	}
	store, err := dao.Open(context.Background(), dao.DriverSQLite, db, dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	o, err := store.Order(context.Background(), sn)
	if err != nil || o.Status != model.OrderPaid {
		t.Fatalf("order %s: %+v %v, want paid", sn, o.Status, err)
	}
	// jsapi without the payer's openid is refused before anything opens.
	order2 := call("/api/v1/orders", "wx-order-2", `{"items":[{"sku_id":1,"quantity":1}]}`)
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/orders/"+order2["order_sn"].(string)+"/pay", strings.NewReader(`{"provider":"wechatpay","method":"jsapi"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", "wx-pay-2")
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusBadRequest {
		t.Fatalf("jsapi without openid: %d, want 400", r2.StatusCode)
	}
}

// postWeChat signs body now with the dev key keyFile as serial, and
// posts it as WeChat Pay does.
func postWeChat(t *testing.T, to string, body []byte, keyFile, serial string) (int, string) {
	t.Helper()
	g, err := fakewechatpay.SignNotification(devKey(keyFile), serial, time.Now(), body)
	if err != nil {
		t.Fatal(err)
	}
	h := make(http.Header)
	g.Set(h)
	return postWeChatHeaders(t, to, body, h)
}

func postWeChatHeaders(t *testing.T, to string, body []byte, h http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, to, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
