package wechatpay_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/fakewechatpay"
	"paynotify/model"
	"paynotify/wechatpay"
)

func TestProvider(t *testing.T) {
	e := newEnv(t, nil)
	p := wechatpay.NewProvider(e.client, e.recv.srv.URL)
	ctx := context.Background()
	start := func(m model.PayMethod, no string, payer model.Payer) string {
		t.Helper()
		s, err := p.StartPayment(ctx, model.PayStart{OutTradeNo: no, Subject: "Order " + no, Amount: decimal.RequireFromString("88.00"),
			Method: m, ExpireAt: time.Now().Add(10 * time.Minute), Payer: payer})
		if err != nil {
			t.Fatalf("start %s: %v", m, err)
		}
		return s
	}
	for _, m := range []model.PayMethod{model.PayNative, model.PayH5, model.PayJSAPI, model.PayApp} {
		if !p.Accepts(m) || p.SignsLocally(m) {
			t.Errorf("%s: accepts %v, signs locally %v", m, p.Accepts(m), p.SignsLocally(m))
		}
	}
	if p.Accepts(model.PayQR) {
		t.Error("WeChat Pay accepts Alipay's qr")
	}
	var cp model.ClientPay
	if err := json.Unmarshal([]byte(start(model.PayJSAPI, "DEMO-9001", model.Payer{OpenID: "oDEMO"})), &cp); err != nil || cp.PrepayID == "" || cp.Params["paySign"] == "" {
		t.Fatalf("jsapi answer %+v %v", cp, err)
	}
	start(model.PayNative, "DEMO-9002", model.Payer{})
	if tr, _ := e.fake.Trade("DEMO-9002"); tr.Total != 8800 {
		t.Fatalf("88.00 yuan opened as %d fen", tr.Total)
	}
	if tr, err := p.QueryTrade(ctx, "DEMO-9002"); err != nil || tr.Status != model.TradeOpen || tr.Provider != model.ProviderWechatpay {
		t.Fatalf("query unpaid: %+v %v", tr, err)
	}
	if err := e.fake.Pay(ctx, "DEMO-9002"); err != nil {
		t.Fatal(err)
	}
	tr, err := p.QueryTrade(ctx, "DEMO-9002")
	if err != nil || tr.Status != model.TradePaid || !tr.Amount.Equal(decimal.RequireFromString("88.00")) || tr.TradeNo == "" || tr.PaidAt == nil {
		t.Fatalf("query paid: %+v %v", tr, err)
	}
	if o := tr.Observation(model.PayAttempt{}); o.Check() != nil || o.Provider != model.ProviderWechatpay {
		t.Fatalf("observation %+v: %v", o, o.Check())
	}

	t.Run("Refund", func(t *testing.T) {
		if done, err := p.RefundDone(ctx, tr.TradeNo, "RF-9002-1", decimal.RequireFromString("10.00")); err != nil || done {
			t.Fatalf("before: done %v %v", done, err)
		}
		if err := p.Refund(ctx, tr.TradeNo, "RF-9002-1", decimal.RequireFromString("10.00"), "after-sale"); !errors.Is(err, model.ErrGatewayUnknown) {
			t.Fatalf("refund: %v, want PROCESSING as unknown", err)
		}
		if done, err := p.RefundDone(ctx, tr.TradeNo, "RF-9002-1", decimal.RequireFromString("10.00")); err != nil || !done {
			t.Fatalf("after: done %v %v", done, err)
		}
		e.fake.SettleNextRefunds(wechatpay.RefundAbnormal, 1)
		p.Refund(ctx, tr.TradeNo, "RF-9002-2", decimal.RequireFromString("1.00"), "")
		// ABNORMAL is no refund to send again: it waits for an operator.
		if done, err := p.RefundDone(ctx, tr.TradeNo, "RF-9002-2", decimal.RequireFromString("1.00")); !errors.Is(err, model.ErrRefundStuck) || done {
			t.Fatalf("abnormal: done %v %v, want model.ErrRefundStuck (an operator settles it)", done, err)
		}
		if err := p.Refund(ctx, tr.TradeNo, "RF-9002-2", decimal.RequireFromString("1.00"), ""); !errors.Is(err, model.ErrRefundStuck) {
			t.Fatalf("abnormal asked again: %v, want stuck for an operator", err)
		}
		if got, _ := e.fake.Trade("DEMO-9002"); got.Refunded != 1100 {
			t.Fatalf("refunded %d fen, want 1100", got.Refunded)
		}
	})
	t.Run("FenOnly", func(t *testing.T) {
		if _, err := wechatpay.Fen(decimal.RequireFromString("0.001")); !errors.Is(err, model.ErrInvalidRequest) {
			t.Fatalf("0.001 yuan: %v", err)
		}
	})
}

func TestProviderTradeBill(t *testing.T) {
	e := newEnv(t, nil)
	p := wechatpay.NewProvider(e.client, e.recv.srv.URL)
	ctx := context.Background()
	if _, err := p.TradeBill(ctx, time.Now()); !errors.Is(err, model.ErrNoBill) {
		t.Fatalf("a day without trades: %v, want ErrNoBill", err)
	}
	e.paidTrade(t, "DEMO-9101", 1234)
	b, err := p.TradeBill(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var got []model.BillEntry
	if err := b.Entries(func(x model.BillEntry) error { got = append(got, x); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].OutTradeNo != "DEMO-9101" || !got[0].Amount.Equal(decimal.RequireFromString("12.34")) {
		t.Fatalf("entries %+v", got)
	}
}

// A JSAPI payment in the merchant's mini program: the prepay names the
// mini program's appid (the openid is one of its users'), the signed
// parameters carry it, and the notification and the query name it back —
// the ledger's app.
func TestProviderForApp(t *testing.T) {
	const mini = "wx9999999999999999"
	e := newEnv(t, func(fc *fakewechatpay.Config, cc *wechatpay.Config) {
		fc.AppIDs = []string{mini}
		cc.AppIDs = []string{mini}
	})
	p := wechatpay.NewProvider(e.client, e.recv.srv.URL).ForApp(mini)
	ctx := context.Background()
	s, err := p.StartPayment(ctx, model.PayStart{OutTradeNo: "MINI-0001", Subject: "Order MINI-0001", Amount: decimal.RequireFromString("9.00"),
		Method: model.PayJSAPI, ExpireAt: time.Now().Add(10 * time.Minute), Payer: model.Payer{OpenID: "oMINI"}})
	if err != nil {
		t.Fatal(err)
	}
	var cp model.ClientPay
	if err := json.Unmarshal([]byte(s), &cp); err != nil || cp.Params["appId"] != mini {
		t.Fatalf("jsapi params %+v %v, want appId %s", cp.Params, err, mini)
	}
	if tr, ok := e.fake.Trade("MINI-0001"); !ok || tr.AppID != mini {
		t.Fatalf("the fake's trade is in app %q (%v), want %s", tr.AppID, ok, mini)
	}
	if err := e.fake.Pay(ctx, "MINI-0001"); err != nil {
		t.Fatal(err)
	}
	e.fake.WaitNotifications()
	got, errs := e.recv.Got()
	if len(errs) != 0 || len(got) != 1 || got[0].Payment == nil || got[0].Payment.AppID != mini {
		t.Fatalf("notifications %+v, errors %v", got, errs)
	}
	if o := got[0].Payment.Observation(); o.App != mini || o.Account != e.client.MchID() {
		t.Fatalf("observation in %s/%s, want %s/%s", o.Account, o.App, e.client.MchID(), mini)
	}
	// The first appid's provider starts in the first appid.
	s, err = wechatpay.NewProvider(e.client, e.recv.srv.URL).StartPayment(ctx, model.PayStart{OutTradeNo: "MINI-0002", Subject: "Order MINI-0002",
		Amount: decimal.RequireFromString("9.00"), Method: model.PayJSAPI, ExpireAt: time.Now().Add(10 * time.Minute), Payer: model.Payer{OpenID: "oOFFICIAL"}})
	if err := json.Unmarshal([]byte(s), &cp); err != nil || cp.Params["appId"] != e.client.AppID() {
		t.Fatalf("default app params %+v %v", cp.Params, err)
	}
}
