package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/fakewechatpay"
	"paynotify/handler"
	"paynotify/model"
	"paynotify/wechatpay"
)

// serve with PROVIDERS_FILE of two Alipay sellers, two apps under the
// first and one under the second, each app its own key pair: each app's
// notification, verified with that app's Alipay key, is applied once and
// recorded with its seller and app; an unconfigured app is refused
// (failure, nothing written, WARN naming it, unknown_app counted); and a
// payment starts in the app the request names.
func TestServeAlipayApps(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	type app struct{ id, seller, name, alipayKey string }
	apps := []*app{
		{id: "2021000000000031", seller: "2088000000000031", name: "web"},
		{id: "2021000000000032", seller: "2088000000000031", name: "mobile"},
		{id: "2021000000000041", seller: "2088000000000041", name: "group"},
	}
	var file strings.Builder
	file.WriteString("alipay:\n")
	for i, a := range apps {
		if i == 0 || a.seller != apps[i-1].seller {
			fmt.Fprintf(&file, "  - seller_id: %q\n    apps:\n", a.seller)
		}
		private, _ := newKeyPair(t)
		alipayPrivate, alipayPublic := newKeyPair(t)
		a.alipayKey = alipayPrivate
		fmt.Fprintf(&file, "      - app_id: %q\n        name: %s\n        private_key_file: %s\n        alipay_public_key_file: %s\n",
			a.id, a.name, write(a.name+"-key.pem", private), write(a.name+"-alipay.pem", alipayPublic))
		if a.name == "mobile" {
			file.WriteString("        methods: [wap, qr]\n")
		}
	}
	secret := "apps-test-jwt-secret-0123456789abcdef"
	db := filepath.Join(dir, "apps.db")
	environ := []string{"DB_DRIVER=sqlite", "DB_DSN=" + db, "PROVIDERS_FILE=" + write("providers.yaml", file.String()),
		"API_JWT_SECRET=" + secret, "PUBLIC_URL=https://pay.example", "RECON_AT=off", "ORDER_PAY_TIMEOUT=24h"}
	if err := run(context.Background(), environment{args: []string{"migrate"}, environ: environ, stdout: io.Discard, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	store, err := dao.Open(context.Background(), dao.DriverSQLite, db, dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	base, logs := start(t, []string{"serve"}, environ)

	notify := func(a *app, appID, sellerID, sn, tradeNo string) string {
		t.Helper()
		form := url.Values{
			"notify_type": {"trade_status_sync"}, "notify_id": {"n-" + tradeNo}, "notify_time": {"2026-11-30 12:00:00"},
			"app_id": {appID}, "seller_id": {sellerID}, "charset": {"utf-8"}, "version": {"1.0"},
			"trade_no": {tradeNo}, "out_trade_no": {sn}, "trade_status": {"TRADE_SUCCESS"}, "total_amount": {"9.00"},
			"gmt_payment": {alipay.FormatTime(time.Now().Add(-time.Minute))},
		}
		signed, err := alipay.SignForm(a.alipayKey, form)
		if err != nil {
			t.Fatal(err)
		}
		return post(t, base+"/alipay/notify", signed.Encode())
	}
	for i, a := range apps {
		sn := fmt.Sprintf("APPS-%d", i)
		o, err := store.CreateOrder(ctx, sn, 1, decimal.RequireFromString("9.00"))
		if err != nil {
			t.Fatal(err)
		}
		tradeNo := fmt.Sprintf("20261130220014%014d", i)
		for range 2 { // the resend is a duplicate
			if got := notify(a, a.id, a.seller, sn, tradeNo); got != "success" {
				t.Fatalf("%s: answer %q\n%s", a.name, got, logs)
			}
		}
		// Signed with another app's Alipay key: not this app's notification.
		if got := notify(apps[(i+1)%len(apps)], a.id, a.seller, sn, tradeNo+"9"); got != "failure" {
			t.Fatalf("%s: signed with another app's key: %q", a.name, got)
		}
		pays, err := store.PaymentsByOrder(ctx, o.ID)
		if err != nil || len(pays) != 1 || pays[0].State != model.PaymentApplied || pays[0].Account != a.seller || pays[0].App != a.id {
			t.Fatalf("%s: payments %+v %v", a.name, pays, err)
		}
	}
	// An app nobody configured, signed with a configured app's key.
	o, err := store.CreateOrder(ctx, "APPS-UNKNOWN", 1, decimal.RequireFromString("9.00"))
	if err != nil {
		t.Fatal(err)
	}
	if got := notify(apps[0], "2021000000000999", apps[0].seller, "APPS-UNKNOWN", "20261130220014999999"); got != "failure" {
		t.Fatalf("unknown app: %q", got)
	}
	if pays, _ := store.PaymentsByOrder(ctx, o.ID); len(pays) != 0 {
		t.Fatalf("unknown app wrote %+v", pays)
	}
	waitForMetrics(t, base, []string{`paynotify_notify_refused_total{provider="alipay",reason="unknown_app"} 1`}, nil)
	// serve's log leaves in batches (asynclog): the line may follow the
	// answer by a few milliseconds.
	waitFor(t, "a log line naming the unknown app", func() bool { return strings.Contains(logs.String(), "2021000000000999") })

	// Paying names the app; an unknown one, or one that cannot take the
	// method, is a 400 naming it.
	token, err := handler.MemberToken([]byte(secret), 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateOrder(ctx, "APPS-PAY", 1, decimal.RequireFromString("9.00")); err != nil {
		t.Fatal(err)
	}
	keys := 0
	pay := func(body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/orders/APPS-PAY/pay", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		keys++
		req.Header.Set("Idempotency-Key", fmt.Sprintf("apps-pay-%d", keys))
		rsp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer rsp.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(rsp.Body).Decode(&v)
		return rsp.StatusCode, v
	}
	if code, v := pay(`{"provider":"alipay","method":"wap","app":"mobile"}`); code != http.StatusOK || v["app"] != apps[1].id || v["account"] != apps[1].seller ||
		!strings.Contains(fmt.Sprint(v["pay_url"]), "app_id="+apps[1].id) {
		t.Fatalf("pay in mobile: %d %v", code, v)
	}
	for body, want := range map[string]string{
		`{"provider":"alipay","method":"page","app":"kiosk"}`:  `no app \"kiosk\"`,
		`{"provider":"alipay","method":"page","app":"mobile"}`: `takes no method \"page\"`,
	} {
		if code, v := pay(body); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(v), strings.ReplaceAll(want, `\"`, `"`)) {
			t.Errorf("%s: %d %v, want 400 saying %s", body, code, v, want)
		}
	}
}

// serve with PROVIDERS_FILE of a WeChat Pay merchant with two appids: a
// JSAPI payment in the mini program sends the mini program's appid to the
// prepay (and signs it into the client's parameters); an app whose methods
// leave the method out is a 400; switching the order to the official
// account closes the mini program's trade first; and a second merchant
// beside it (its own keys, a shared WeChat Pay key serial) takes the
// order next, its notice recorded under its mchid.
func TestServeWeChatPayApps(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	merchantKey, merchantPub := newKeyPair(t)
	wechatKey, wechatPub := newKeyPair(t)
	const mchID, official, mini, serial, keyID = "1900000052", "wx0000000000000052", "wx0000000000000053", "5157F09EFDC096DE15EBE81A47057A7232F1B8E2", "PUB_KEY_ID_0119000000000052"
	const apiV3Key = "0123456789abcdef0123456789abcdef"
	wx, err := fakewechatpay.New(fakewechatpay.Config{MchID: mchID, AppID: official, AppIDs: []string{mini}, APIv3Key: apiV3Key, PrivateKey: wechatKey,
		PublicKeyID: keyID, Sign: fakewechatpay.SignPublicKey, MerchantPublicKey: merchantPub, MerchantSerial: serial})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(wx.Handler())
	t.Cleanup(gw.Close)
	t.Cleanup(wx.Close)
	// A second merchant (another company of the group): its own APIv3 key
	// and merchant key, the same WeChat Pay public key (a shared serial).
	const mchID2, group, apiV3Key2 = "1900000062", "wx0000000000000062", "fedcba9876543210fedcba9876543210"
	merchantKey2, merchantPub2 := newKeyPair(t)
	wx2, err := fakewechatpay.New(fakewechatpay.Config{MchID: mchID2, AppID: group, APIv3Key: apiV3Key2, PrivateKey: wechatKey,
		PublicKeyID: keyID, Sign: fakewechatpay.SignPublicKey, MerchantPublicKey: merchantPub2, MerchantSerial: serial})
	if err != nil {
		t.Fatal(err)
	}
	gw2 := httptest.NewServer(wx2.Handler())
	t.Cleanup(gw2.Close)
	t.Cleanup(wx2.Close)
	file := fmt.Sprintf(`wechatpay:
  - mchid: %q
    apiv3_key_files: [%s]
    merchant_key_file: %s
    merchant_serial: %s
    public_key_file: %s
    public_key_id: %s
    gateway: %s
    apps:
      - { appid: %s, name: official }
      - { appid: %s, name: miniprogram, methods: [jsapi] }
  - mchid: %q
    apiv3_key_files: [%s]
    merchant_key_file: %s
    merchant_serial: %s
    public_key_file: %s
    public_key_id: %s
    gateway: %s
    apps:
      - { appid: %s, name: group }
`, mchID, write("apiv3", apiV3Key), write("apiclient_key.pem", merchantKey), serial, write("pub_key.pem", wechatPub), keyID, gw.URL, official, mini,
		mchID2, write("apiv3-2", apiV3Key2), write("apiclient_key-2.pem", merchantKey2), serial, write("pub_key.pem", wechatPub), keyID, gw2.URL, group)
	secret := "wx-apps-test-jwt-secret-0123456789abcdef"
	db := filepath.Join(dir, "wx.db")
	environ := []string{"DB_DRIVER=sqlite", "DB_DSN=" + db, "PROVIDERS_FILE=" + write("providers.yaml", file),
		"API_JWT_SECRET=" + secret, "PUBLIC_URL=https://pay.example", "RECON_AT=off", "ORDER_PAY_TIMEOUT=24h"}
	if err := run(context.Background(), environment{args: []string{"migrate"}, environ: environ, stdout: io.Discard, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	store, err := dao.Open(context.Background(), dao.DriverSQLite, db, dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	base, _ := start(t, []string{"serve"}, environ)
	o, err := store.CreateOrder(ctx, "WXAPPS-1", 1, decimal.RequireFromString("9.00"))
	if err != nil {
		t.Fatal(err)
	}
	token, err := handler.MemberToken([]byte(secret), 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keys := 0
	pay := func(body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/orders/WXAPPS-1/pay", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		keys++
		req.Header.Set("Idempotency-Key", fmt.Sprintf("wx-apps-pay-%d", keys))
		rsp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer rsp.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(rsp.Body).Decode(&v)
		return rsp.StatusCode, v
	}
	code, v := pay(`{"provider":"wechatpay","method":"jsapi","app":"miniprogram","openid":"oMINI"}`)
	params, _ := v["params"].(map[string]any)
	if code != http.StatusOK || v["app"] != mini || v["account"] != mchID || params["appId"] != mini {
		t.Fatalf("jsapi in the mini program: %d %v", code, v)
	}
	if tr, ok := wx.Trade("WXAPPS-1"); !ok || tr.AppID != mini {
		t.Fatalf("the prepay named appid %q (%v), want %s", tr.AppID, ok, mini)
	}
	if code, v := pay(`{"provider":"wechatpay","method":"native","app":"miniprogram"}`); code != http.StatusBadRequest ||
		!strings.Contains(fmt.Sprint(v), `takes no method "native"`) {
		t.Fatalf("native in the mini program: %d %v, want 400", code, v)
	}
	code, v = pay(`{"provider":"wechatpay","method":"jsapi","app":"official","openid":"oOFFICIAL"}`)
	params, _ = v["params"].(map[string]any)
	if code != http.StatusOK || v["app"] != official || v["attempt_no"] != float64(2) || params["appId"] != official {
		t.Fatalf("jsapi in the official account: %d %v", code, v)
	}
	if tr, _ := wx.Trade("WXAPPS-1"); tr.State != wechatpay.TradeClosed {
		t.Fatalf("the mini program's trade is %s, want closed before the switch", tr.State)
	}
	a, err := store.LatestAttempt(ctx, o.ID)
	if err != nil || a.App != official || a.Account != mchID {
		t.Fatalf("latest attempt %+v %v", a, err)
	}

	// The second merchant: switching to it closes the first merchant's
	// trade (through the first), the trade opens there, and its notice —
	// sealed with its APIv3 key, sent to the one notify URL — is taken
	// under its mchid. Sealed with its key but naming the first merchant:
	// refused (a notice is taken only from the merchant whose key opened it
	// and whose mchid it names).
	code, v = pay(`{"provider":"wechatpay","method":"native","app":"group"}`)
	if code != http.StatusOK || v["app"] != group || v["account"] != mchID2 {
		t.Fatalf("native in the second merchant: %d %v", code, v)
	}
	if tr, _ := wx.Trade("WXAPPS-1"); tr.State != wechatpay.TradeClosed {
		t.Fatalf("the first merchant's trade is %s, want closed before the switch", tr.State)
	}
	outTradeNo, _ := v["out_trade_no"].(string)
	if tr, ok := wx2.Trade(outTradeNo); !ok || tr.AppID != group {
		t.Fatalf("the second merchant's trade %+v (%v)", tr, ok)
	}
	notice := func(mchid, appid, transactionID string) int {
		t.Helper()
		resource, _ := json.Marshal(map[string]any{
			"appid": appid, "mchid": mchid, "out_trade_no": outTradeNo, "transaction_id": transactionID,
			"trade_type": "NATIVE", "trade_state": "SUCCESS", "success_time": time.Now().Format(time.RFC3339),
			"payer": map[string]string{"openid": "o"}, "amount": map[string]any{"total": 900, "payer_total": 900, "currency": "CNY", "payer_currency": "CNY"},
		})
		body, err := fakewechatpay.Body{ID: "EV-" + transactionID, EventType: wechatpay.EventTransactionSuccess, Summary: "支付成功",
			OriginalType: "transaction", CreateTime: time.Now(), Resource: resource, Nonce: "0123456789ab"}.Seal(apiV3Key2)
		if err != nil {
			t.Fatal(err)
		}
		signed, err := fakewechatpay.SignNotification(wechatKey, keyID, time.Now(), body)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, base+"/wechatpay/notify", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		signed.Set(req.Header)
		rsp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		rsp.Body.Close()
		return rsp.StatusCode
	}
	if code := notice(mchID, official, "4200002026113000000000000061"); code < 400 {
		t.Fatalf("the second merchant's key naming the first merchant: %d, want refused", code)
	}
	if code := notice(mchID2, group, "4200002026113000000000000062"); code != http.StatusNoContent {
		t.Fatalf("the second merchant's notice: %d, want 204", code)
	}
	pays, err := store.PaymentsByOrder(ctx, o.ID)
	if err != nil || len(pays) != 1 || pays[0].State != model.PaymentApplied || pays[0].Account != mchID2 || pays[0].App != group {
		t.Fatalf("payments %+v %v, want one APPLIED under the second merchant", pays, err)
	}
}
