package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/fakealipay"
	"paynotify/handler"
)

// A provider's refusal or silence when a payment starts is answered with
// that provider's code and name: WeChat Pay's wechatpay_refused (502) and
// wechatpay_unavailable (503), Alipay's alipay_refused and
// alipay_unavailable as before — never Alipay for WeChat Pay's.
func TestPayStartGatewayErrorsNameTheirProvider(t *testing.T) {
	const secret = "gateway-errors-jwt-secret-0123456789abcdef"
	ali, aliEnv := startFakeAlipay(t)
	dir := t.TempDir()
	wx, wechatEnv := startFakeWechat(t, dir)
	db := filepath.Join(dir, "gw.db")
	store := migratedSQLite(t, db)
	environ := append(append([]string{"DB_DRIVER=sqlite", "DB_DSN=" + db,
		"API_JWT_SECRET=" + secret, "PUBLIC_URL=https://shop.example", "ALIPAY_JOBS_INTERVAL=1h", "WECHATPAY_JOBS_INTERVAL=1h",
		"ORDER_PAY_TIMEOUT=24h", "RECON_AT=off"}, aliEnv...), wechatEnv...)
	base, logs := start(t, []string{"serve"}, environ)
	token, err := handler.MemberToken([]byte(secret), 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name, body string
		fault      func()
		status     int
		code, msg  string
	}{
		{name: "WeChatPayRefuses", body: `{"provider":"wechatpay","method":"native"}`,
			fault:  func() { wx.FailNext("pay", http.StatusBadRequest, "PARAM_ERROR", 1) },
			status: http.StatusBadGateway, code: "wechatpay_refused", msg: "WeChat Pay refused the request"},
		{name: "WeChatPayUnreachable", body: `{"provider":"wechatpay","method":"native"}`,
			fault:  func() { wx.DropNext("pay", 1) },
			status: http.StatusServiceUnavailable, code: "wechatpay_unavailable", msg: "WeChat Pay's answer is unknown"},
		{name: "WeChatPaySystemError", body: `{"provider":"wechatpay","method":"native"}`,
			fault:  func() { wx.FailNext("pay", http.StatusInternalServerError, "SYSTEM_ERROR", 1) },
			status: http.StatusServiceUnavailable, code: "wechatpay_unavailable", msg: "WeChat Pay's answer is unknown"},
		{name: "AlipayRefuses", body: `{"method":"qr"}`,
			fault:  func() { ali.FailNext(fakealipay.MethodPrecreate, "40004", "ACQ.INVALID_PARAMETER", 1) },
			status: http.StatusBadGateway, code: "alipay_refused", msg: "Alipay refused the request"},
		{name: "AlipayUnavailable", body: `{"method":"qr"}`,
			fault:  func() { ali.FailNext(fakealipay.MethodPrecreate, "40004", "ACQ.SYSTEM_ERROR", 1) },
			status: http.StatusServiceUnavailable, code: "alipay_unavailable", msg: "Alipay's answer is unknown"},
	}
	client := &http.Client{Timeout: 30 * time.Second}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sn := "GWERR-" + tc.name
			if _, err := store.CreateOrder(context.Background(), sn, 1, decimal.RequireFromString("10.00")); err != nil {
				t.Fatal(err)
			}
			tc.fault()
			req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/orders/"+sn+"/pay", strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Idempotency-Key", "gw-"+string(rune('a'+i)))
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Error struct{ Code, Message string }
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || body.Error.Code != tc.code || body.Error.Message != tc.msg {
				t.Fatalf("%d %+v, want %d %s %q\n%s", resp.StatusCode, body.Error, tc.status, tc.code, tc.msg, logs)
			}
			if strings.HasPrefix(tc.code, "wechatpay") && strings.Contains(body.Error.Message, "Alipay") {
				t.Fatalf("WeChat Pay's error names Alipay: %q", body.Error.Message)
			}
		})
	}
}
