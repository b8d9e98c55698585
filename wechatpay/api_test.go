package wechatpay_test

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"paynotify/fakewechatpay"
	"paynotify/internal/devkey"
	"paynotify/model"
	"paynotify/wechatpay"
)

// pay opens a trade through the client.
func (e *env) pay(t *testing.T, m wechatpay.Method, outTradeNo string, fen int64) wechatpay.PayAnswer {
	t.Helper()
	a, err := e.client.Pay(context.Background(), wechatpay.PayRequest{
		Method: m, OutTradeNo: outTradeNo, Description: "Espresso beans 1kg", Total: fen,
		ExpireAt: time.Now().Add(15 * time.Minute), NotifyURL: e.recv.srv.URL,
		OpenID: "oDEMO-openid", PayerIP: "203.0.113.7",
	})
	if err != nil {
		t.Fatalf("pay %s %s: %v", m, outTradeNo, err)
	}
	return a
}

// paidTrade opens a native trade and has the buyer pay it.
func (e *env) paidTrade(t *testing.T, outTradeNo string, fen int64) fakewechatpay.Trade {
	t.Helper()
	e.pay(t, wechatpay.MethodNative, outTradeNo, fen)
	if err := e.fake.Pay(context.Background(), outTradeNo); err != nil {
		t.Fatalf("buyer pays %s: %v", outTradeNo, err)
	}
	tr, _ := e.fake.Trade(outTradeNo)
	return tr
}

func TestPayMethods(t *testing.T) {
	e := newEnv(t, nil)
	merchant := parsePub(t, devkey.Read(t, "wechatpay_merchant_public_key.pem"))
	t.Run("Native", func(t *testing.T) {
		a := e.pay(t, wechatpay.MethodNative, "DEMO-2001", 8900)
		if !strings.Contains(a.CodeURL, "/cashier/") || a.H5URL != "" || a.Params != nil {
			t.Fatalf("answer %+v", a)
		}
	})
	t.Run("H5", func(t *testing.T) {
		a := e.pay(t, wechatpay.MethodH5, "DEMO-2002", 8900)
		if a.H5URL == "" || a.CodeURL != "" {
			t.Fatalf("answer %+v", a)
		}
	})
	t.Run("JSAPI", func(t *testing.T) {
		a := e.pay(t, wechatpay.MethodJSAPI, "DEMO-2003", 8900)
		p := a.Params
		if a.PrepayID == "" || p["appId"] != appID || p["package"] != "prepay_id="+a.PrepayID || p["signType"] != "RSA" {
			t.Fatalf("answer %+v", a)
		}
		verifyPaySign(t, merchant, p["appId"]+"\n"+p["timeStamp"]+"\n"+p["nonceStr"]+"\n"+p["package"]+"\n", p["paySign"])
	})
	t.Run("App", func(t *testing.T) {
		a := e.pay(t, wechatpay.MethodApp, "DEMO-2004", 8900)
		p := a.Params
		if p["appid"] != appID || p["partnerid"] != mchID || p["prepayid"] != a.PrepayID || p["package"] != "Sign=WXPay" {
			t.Fatalf("answer %+v", a)
		}
		verifyPaySign(t, merchant, p["appid"]+"\n"+p["timestamp"]+"\n"+p["noncestr"]+"\n"+p["prepayid"]+"\n", p["sign"])
	})
	t.Run("Refused", func(t *testing.T) {
		for _, r := range []wechatpay.PayRequest{
			{Method: wechatpay.MethodJSAPI, OutTradeNo: "DEMO-2005", Description: "x", Total: 1},           // no openid
			{Method: wechatpay.MethodH5, OutTradeNo: "DEMO-2005", Description: "x", Total: 1},              // no IP
			{Method: "card", OutTradeNo: "DEMO-2005", Description: "x", Total: 1},                          // no such method
			{Method: wechatpay.MethodNative, OutTradeNo: "D-1", Description: "x", Total: 1},                // too short
			{Method: wechatpay.MethodNative, OutTradeNo: "DEMO-2005-" + strings.Repeat("9", 23), Total: 1}, // too long
			{Method: wechatpay.MethodNative, OutTradeNo: "DEMO 2005", Description: "x", Total: 1},          // a space
			{Method: wechatpay.MethodNative, OutTradeNo: "DEMO-2005", Description: "x", Total: 0},          // nothing to pay
		} {
			if _, err := e.client.Pay(context.Background(), r); !errors.Is(err, model.ErrInvalidRequest) {
				t.Errorf("%+v: err %v, want ErrInvalidRequest", r, err)
			}
		}
		if n := e.fake.Calls("pay"); n != 4 {
			t.Errorf("the fake saw %d pay calls, want the 4 above only", n)
		}
	})
	t.Run("PaidAlready", func(t *testing.T) {
		e.paidTrade(t, "DEMO-2006", 100)
		_, err := e.client.Pay(context.Background(), wechatpay.PayRequest{Method: wechatpay.MethodNative, OutTradeNo: "DEMO-2006", Description: "x", Total: 100, NotifyURL: e.recv.srv.URL})
		var ae *wechatpay.APIError
		if !errors.As(err, &ae) || !ae.Signed || ae.Code != "ORDERPAID" || !errors.Is(err, model.ErrTradeStatus) {
			t.Fatalf("err %v, want a signed ORDERPAID", err)
		}
	})
}

// verifyPaySign checks a client-side signature with the merchant's key.
func verifyPaySign(t *testing.T, key *rsa.PublicKey, msg, sig string) {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256([]byte(msg))
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, d[:], raw); err != nil {
		t.Fatalf("signature over %q: %v", msg, err)
	}
}

func parsePub(t *testing.T, s string) *rsa.PublicKey {
	t.Helper()
	k, err := wechatpay.ParsePublicKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestCashierNotifies(t *testing.T) {
	e := newEnv(t, nil)
	a := e.pay(t, wechatpay.MethodNative, "DEMO-3001", 10000)
	page := get(t, a.CodeURL)
	if !strings.Contains(page, "<button") || !strings.Contains(page, "100.00") {
		t.Fatalf("cashier page:\n%s", page)
	}
	prepay := a.CodeURL[strings.LastIndex(a.CodeURL, "/")+1:]
	rsp, err := http.PostForm(e.gw.URL+"/cashier/pay", url.Values{"prepay_id": {prepay}})
	if err != nil {
		t.Fatal(err)
	}
	rsp.Body.Close()
	got, errs := e.recv.Got()
	if len(errs) > 0 || len(got) != 1 || got[0].Payment == nil {
		t.Fatalf("notifications %+v, refusals %v", got, errs)
	}
	p := got[0].Payment
	tr, _ := e.fake.Trade("DEMO-3001")
	if p.OutTradeNo != "DEMO-3001" || p.Total != 10000 || p.TransactionID != tr.TransactionID || p.NotifyID == "" {
		t.Fatalf("payment %+v, trade %+v", p, tr)
	}
}

func get(t *testing.T, u string) string {
	t.Helper()
	rsp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	b, _ := io.ReadAll(rsp.Body)
	return string(b)
}

func TestQueryAndClose(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	if _, err := e.client.QueryTrade(ctx, "DEMO-4000"); !errors.Is(err, model.ErrTradeNotExist) {
		t.Fatalf("query of an unknown trade: %v, want ErrTradeNotExist", err)
	}
	e.pay(t, wechatpay.MethodNative, "DEMO-4001", 500)
	st, err := e.client.QueryTrade(ctx, "DEMO-4001")
	if err != nil || st.State != wechatpay.TradeNotPay || st.Transaction != nil {
		t.Fatalf("query: %+v %v", st, err)
	}
	tr := e.paidTrade(t, "DEMO-4002", 700)
	st, err = e.client.QueryTrade(ctx, "DEMO-4002")
	if err != nil || st.State != wechatpay.TradeSuccess || st.Transaction == nil ||
		st.Transaction.TransactionID != tr.TransactionID || st.Transaction.Total != 700 || st.Transaction.NotifyID != "" {
		t.Fatalf("query: %+v %v", st, err)
	}
	// Close: unknown is fine (never opened), unpaid closes, paid refuses.
	if err := e.client.CloseTrade(ctx, "DEMO-4000"); err != nil {
		t.Fatalf("close unknown: %v", err)
	}
	if err := e.client.CloseTrade(ctx, "DEMO-4001"); err != nil {
		t.Fatalf("close unpaid: %v", err)
	}
	if st, _ := e.client.QueryTrade(ctx, "DEMO-4001"); st.State != wechatpay.TradeClosed {
		t.Fatalf("closed trade queried %s", st.State)
	}
	if err := e.client.CloseTrade(ctx, "DEMO-4002"); !errors.Is(err, model.ErrTradeStatus) {
		t.Fatalf("close paid: %v, want ErrTradeStatus", err)
	}
}

func TestRefund(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	tr := e.paidTrade(t, "DEMO-5001", 10000)
	req := wechatpay.RefundRequest{TransactionID: tr.TransactionID, OutRefundNo: "RF-5001-1", Refund: 2500, Total: 10000, Reason: "after-sale"}
	if _, err := e.client.QueryRefund(ctx, "RF-5001-1"); !errors.Is(err, wechatpay.ErrNoRefund) {
		t.Fatalf("query before the refund: %v, want ErrNoRefund", err)
	}
	r, err := e.client.Refund(ctx, req)
	if err != nil || r.Status != wechatpay.RefundProcessing || r.Refund != 2500 || r.RefundID == "" {
		t.Fatalf("refund: %+v %v", r, err)
	}
	q, err := e.client.QueryRefund(ctx, "RF-5001-1")
	if err != nil || q.Status != wechatpay.RefundSuccess || q.RefundID != r.RefundID {
		t.Fatalf("refund query: %+v %v", q, err)
	}
	// The same out_refund_no again refunds nothing more.
	if _, err := e.client.Refund(ctx, req); err != nil {
		t.Fatalf("repeat: %v", err)
	}
	if got, _ := e.fake.Trade("DEMO-5001"); got.Refunded != 2500 {
		t.Fatalf("refunded %d fen, want 2500 once", got.Refunded)
	}
	t.Run("Abnormal", func(t *testing.T) {
		e.fake.SettleNextRefunds(wechatpay.RefundAbnormal, 1)
		if _, err := e.client.Refund(ctx, wechatpay.RefundRequest{TransactionID: tr.TransactionID, OutRefundNo: "RF-5001-2", Refund: 100, Total: 10000}); err != nil {
			t.Fatal(err)
		}
		if q, err := e.client.QueryRefund(ctx, "RF-5001-2"); err != nil || q.Status != wechatpay.RefundAbnormal {
			t.Fatalf("query: %+v %v", q, err)
		}
	})
	t.Run("TooMuch", func(t *testing.T) {
		_, err := e.client.Refund(ctx, wechatpay.RefundRequest{TransactionID: tr.TransactionID, OutRefundNo: "RF-5001-3", Refund: 9000, Total: 10000})
		var ae *wechatpay.APIError
		if !errors.As(err, &ae) || !ae.Signed || !errors.Is(err, model.ErrGatewayRefused) {
			t.Fatalf("err %v, want a signed refusal", err)
		}
	})
	t.Run("UnknownTransaction", func(t *testing.T) {
		_, err := e.client.Refund(ctx, wechatpay.RefundRequest{TransactionID: "4200000000000000000000000000", OutRefundNo: "RF-5001-4", Refund: 1, Total: 1})
		if !errors.Is(err, model.ErrTradeNotExist) {
			t.Fatalf("err %v, want ErrTradeNotExist", err)
		}
	})
	t.Run("RefundNotification", func(t *testing.T) {
		_, err := e.client.Refund(ctx, wechatpay.RefundRequest{TransactionID: tr.TransactionID, OutRefundNo: "RF-5001-5", Refund: 10, Total: 10000, NotifyURL: e.recv.srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		e.fake.WaitNotifications()
		got, _ := e.recv.Got()
		last := got[len(got)-1]
		if last.EventType != wechatpay.EventRefundSuccess || last.Payment != nil || last.Refund == nil || last.Refund.OutRefundNo != "RF-5001-5" {
			t.Fatalf("last notification %+v", last)
		}
	})
}

func TestFaults(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.pay(t, wechatpay.MethodNative, "DEMO-6001", 100)
	for _, tc := range []struct {
		name   string
		fault  func()
		signed bool
		want   error
	}{
		{"SignedSystemError", func() { e.fake.FailNext("query", 500, "SYSTEM_ERROR", 1) }, true, model.ErrGatewayUnknown},
		{"SignedRateLimit", func() { e.fake.FailNext("query", 429, "FREQUENCY_LIMITED", 1) }, true, model.ErrGatewayUnknown},
		{"SignedRefusal", func() { e.fake.FailNext("query", 400, "PARAM_ERROR", 1) }, true, model.ErrGatewayRefused},
		{"UnsignedProxyPage", func() { e.fake.DropNext("query", 1) }, false, model.ErrGatewayUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fault()
			_, err := e.client.QueryTrade(ctx, "DEMO-6001")
			var ae *wechatpay.APIError
			if !errors.As(err, &ae) || ae.Signed != tc.signed || !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want signed=%v %v", err, tc.signed, tc.want)
			}
		})
	}
	t.Run("ForgedAnswer", func(t *testing.T) {
		e.fake.ForgeNext("query", 1)
		_, err := e.client.QueryTrade(ctx, "DEMO-6001")
		var ae *wechatpay.APIError
		if errors.As(err, &ae) || !errors.Is(err, model.ErrGatewayUnknown) {
			t.Fatalf("err %v, want ErrGatewayUnknown, not an API answer", err)
		}
	})
	t.Run("Timeout", func(t *testing.T) {
		e.fake.TimeoutNext("refund", time.Minute, 1)
		tr := e.paidTrade(t, "DEMO-6002", 100)
		ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := e.client.Refund(ctx, wechatpay.RefundRequest{TransactionID: tr.TransactionID, OutRefundNo: "RF-6002", Refund: 100, Total: 100})
		if !errors.Is(err, model.ErrGatewayUnknown) {
			t.Fatalf("err %v, want ErrGatewayUnknown", err)
		}
		// The refund happened: the query finds it.
		if q, err := e.client.QueryRefund(context.Background(), "RF-6002"); err != nil || q.Status != wechatpay.RefundSuccess {
			t.Fatalf("query: %+v %v", q, err)
		}
	})
	t.Run("OurSignatureChecked", func(t *testing.T) {
		// A client signing with another key than the merchant's is refused
		// by the fake, signed, 401 SIGN_ERROR.
		cfg := clientConfig(t, true, true)
		cfg.MerchantPrivateKey = devkey.Read(t, "wechatpay_platform_private_key.pem")
		cfg.Gateway = e.gw.URL
		_, err := newClient(t, cfg).QueryTrade(ctx, "DEMO-6001")
		var ae *wechatpay.APIError
		if !errors.As(err, &ae) || !ae.Signed || ae.StatusCode != 401 || ae.Code != "SIGN_ERROR" {
			t.Fatalf("err %v, want a signed 401 SIGN_ERROR", err)
		}
	})
}
