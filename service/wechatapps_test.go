package service_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/fakewechatpay"
	"paynotify/handler"
	"paynotify/internal/devkey"
	"paynotify/model"
	"paynotify/service"
	"paynotify/wechatpay"
	wxbill "paynotify/wechatpay/bill"
)

// The appids of wechatAppsRig's merchant: an official account, a mini
// program (jsapi only) and a mobile app (app only).
const (
	wxOfficial, wxMini, wxMobile = "wx0000000000000081", "wx0000000000000082", "wx0000000000000083"
)

// A WeChat Pay merchant of three appids, each a payment's app: a payment
// starts in the appid it names (jsapi in the mini program sends the mini
// program's appid), its notification — naming that appid — is applied once
// and recorded with the merchant and the appid; a notice naming an appid
// the merchant has not is refused (4xx FAIL) and writes nothing.
func TestWeChatPayAppsEachApplied(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		notifyURL := "http://" + ln.Addr().String() + "/wechatpay/notify"
		wx, p := wechatAppsMerchant(t, notifyURL)
		set := service.NewAppSet(
			service.App{Provider: model.ProviderWechatpay, Account: wxMchID, ID: wxOfficial, Name: "official", Adapter: p},
			service.App{Provider: model.ProviderWechatpay, Account: wxMchID, ID: wxMini, Name: "miniprogram", Methods: []model.PayMethod{model.PayJSAPI}, Adapter: p.ForApp(wxMini)},
			service.App{Provider: model.ProviderWechatpay, Account: wxMchID, ID: wxMobile, Name: "app", Methods: []model.PayMethod{model.PayApp}, Adapter: p.ForApp(wxMobile)},
		)
		providers := service.Providers{model.ProviderWechatpay: set}
		payments := service.NewPayments(store)
		refunds := service.NewRefunds(store, providers, quietLog)
		checkout := service.NewCheckout(store, providers, payments, nil, quietLog)
		notify := httptest.NewUnstartedServer(handler.New(handler.Deps{
			Log: quietLog, WeChatPay: p, Payments: payments, Refunds: refunds, DB: store, Registry: prometheus.NewRegistry(),
		}))
		notify.Listener.Close()
		notify.Listener = ln
		notify.Start()
		t.Cleanup(notify.Close)

		for _, tc := range []struct {
			ref    string
			method model.PayMethod
			payer  model.Payer
			app    string
		}{
			{"", model.PayNative, model.Payer{}, wxOfficial},
			{"miniprogram", model.PayJSAPI, model.Payer{OpenID: "oMINI"}, wxMini},
			{wxMobile, model.PayApp, model.Payer{}, wxMobile},
		} {
			t.Run(tc.app, func(t *testing.T) {
				sn := newSN("WXA")
				o := mustOrder(t, store, sn, "12.00")
				v, err := checkout.StartIn(ctx, rigMember, sn, model.ProviderWechatpay, tc.method, tc.ref, tc.payer)
				if err != nil {
					t.Fatal(err)
				}
				if v.App != tc.app || v.Account != wxMchID {
					t.Fatalf("started in %s/%s, want %s/%s", v.Account, v.App, wxMchID, tc.app)
				}
				if tr, ok := wx.Trade(v.OutTradeNo); !ok || tr.AppID != tc.app {
					t.Fatalf("the fake's trade %+v (%v): want it opened by appid %s", tr, ok, tc.app)
				}
				if tc.method == model.PayJSAPI && v.Params["appId"] != wxMini {
					t.Fatalf("jsapi params %v: want the mini program's appid signed in", v.Params)
				}
				if err := wx.Pay(ctx, v.OutTradeNo); err != nil {
					t.Fatal(err)
				}
				notes := wx.Notifications()
				if err := wx.Resend(ctx, len(notes)-1); err != nil { // a resend is a duplicate
					t.Fatal(err)
				}
				pays := mustPayments(t, store, o.ID)
				if got := mustGetOrder(t, store, sn); got.Status != model.OrderPaid || len(pays) != 1 || pays[0].State != model.PaymentApplied ||
					pays[0].App != tc.app || pays[0].Account != wxMchID {
					t.Fatalf("order %d, payments %+v: want paid once in %s/%s", got.Status, pays, wxMchID, tc.app)
				}
			})
		}

		// A notice naming an appid the merchant has not: refused, nothing
		// written.
		sn := newSN("WXU")
		o := mustOrder(t, store, sn, "3.00")
		resource, _ := json.Marshal(map[string]any{
			"appid": "wx0000000000000089", "mchid": wxMchID, "out_trade_no": sn, "transaction_id": "4200002026113000000000000089",
			"trade_type": "NATIVE", "trade_state": "SUCCESS", "success_time": time.Now().Format(time.RFC3339),
			"payer": map[string]string{"openid": "o"}, "amount": map[string]any{"total": 300, "payer_total": 300, "currency": "CNY", "payer_currency": "CNY"},
		})
		body, err := fakewechatpay.Body{ID: "EV-UNKNOWN-APP", EventType: wechatpay.EventTransactionSuccess, Summary: "支付成功",
			OriginalType: "transaction", CreateTime: time.Now(), Resource: resource, Nonce: "0123456789ab"}.Seal(wxAPIv3Key)
		if err != nil {
			t.Fatal(err)
		}
		signed, err := fakewechatpay.SignNotification(devkey.Read(t, "wechatpay_private_key.pem"), wxPublicKeyID, time.Now(), body)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, notifyURL, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		signed.Set(req.Header)
		rsp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(rsp.Body)
		rsp.Body.Close()
		if rsp.StatusCode < 400 || !strings.Contains(string(answer), `"code":"FAIL"`) {
			t.Fatalf("an unknown appid's notice: %d %s, want refused", rsp.StatusCode, answer)
		}
		if pays := mustPayments(t, store, o.ID); len(pays) != 0 {
			t.Fatalf("an unknown appid's notice wrote %+v", pays)
		}
	})
}

// A payment only the bill knows — its notification lost, and no attempt
// of ours naming its out_trade_no — is recorded in the app the bill's
// 公众账号ID names, not the merchant's first app: the mini program's
// trade of an order paid by its order number is repaired APPLIED in the
// mini program, and its trade for no order of ours UNMATCHED there too.
func TestWeChatPayBillRepairsInTheBillsApp(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		wx, p := wechatAppsMerchant(t, "http://127.0.0.1:9/lost")
		wx.LoseNotifications(true)
		set := service.NewAppSet(
			service.App{Provider: model.ProviderWechatpay, Account: wxMchID, ID: wxOfficial, Adapter: p},
			service.App{Provider: model.ProviderWechatpay, Account: wxMchID, ID: wxMini, Adapter: p.ForApp(wxMini)},
			service.App{Provider: model.ProviderWechatpay, Account: wxMchID, ID: wxMobile, Adapter: p.ForApp(wxMobile)},
		)
		payments := service.NewPayments(store)

		sn, stray := newSN("WXBILL"), newSN("WXSTRAY")
		o := mustOrder(t, store, sn, "7.00")
		for _, no := range []string{sn, stray} {
			if _, err := p.ForApp(wxMini).StartPayment(ctx, model.PayStart{OutTradeNo: no, Subject: "bill", Amount: decimal.RequireFromString("7.00"),
				Method: model.PayJSAPI, ExpireAt: time.Now().Add(time.Hour), Payer: model.Payer{OpenID: "oMINI"}}); err != nil {
				t.Fatal(err)
			}
			if err := wx.Pay(ctx, no); err != nil {
				t.Fatal(err)
			}
		}

		// A line of an appid the merchant does not have here: recorded in
		// its first app, never in an app no query or refund could reach.
		foreign := newSN("WXFOREIGN")
		now := time.Now().UTC().Truncate(time.Second)
		wx.AddToBill(wxbill.Line{BillEntry: model.BillEntry{Kind: model.BillPayment, TradeNo: "4200002026120800000000000042",
			OutTradeNo: foreign, Amount: decimal.RequireFromString("1.00"), Received: decimal.RequireFromString("1.00"),
			Fee: decimal.RequireFromString("-0.00600"), FinishedAt: now, App: "wx0000000000000089"}})

		rec := service.NewReconcilers(store, service.Providers{model.ProviderWechatpay: set}, payments, quietLog)[model.ProviderWechatpay][0]
		rec.SetClock(func() time.Time { return time.Now().Add(24 * time.Hour) })
		run, err := rec.Run(ctx, time.Now().In(model.Beijing).Format(time.DateOnly))
		if err != nil || run.Counts[model.ReconRepaired] != 1 || run.Counts[model.ReconUnmatched] != 2 {
			t.Fatalf("run %+v, %v: want one repaired, two unmatched", run, err)
		}
		if pays := mustPayments(t, store, o.ID); len(pays) != 1 || pays[0].State != model.PaymentApplied || pays[0].App != wxMini {
			t.Fatalf("order %s payments %+v, want one APPLIED in the mini program", sn, pays)
		}
		tr, _ := wx.Trade(stray)
		if pay, err := store.Payment(ctx, model.ProviderWechatpay, tr.TransactionID); err != nil || pay.State != model.PaymentUnmatched ||
			pay.App != wxMini || pay.Account != wxMchID {
			t.Fatalf("the stray trade's payment %+v, %v: want UNMATCHED in %s/%s", pay, err, wxMchID, wxMini)
		}
		if pay, err := store.Payment(ctx, model.ProviderWechatpay, "4200002026120800000000000042"); err != nil ||
			pay.State != model.PaymentUnmatched || pay.App != "" || pay.Account != wxMchID {
			t.Fatalf("the foreign app's payment %+v, %v: want UNMATCHED in %s's first app", pay, err, wxMchID)
		}
	})
}

// wechatAppsMerchant is the fake WeChat Pay of a merchant of three
// appids (wxOfficial its own, wxMini, wxMobile) and the provider that
// speaks to it, notifications sent to notifyURL.
func wechatAppsMerchant(t *testing.T, notifyURL string) (*fakewechatpay.Server, *wechatpay.Provider) {
	t.Helper()
	wx, err := fakewechatpay.New(fakewechatpay.Config{
		MchID: wxMchID, AppID: wxOfficial, AppIDs: []string{wxMini, wxMobile}, APIv3Key: wxAPIv3Key,
		PrivateKey: devkey.Read(t, "wechatpay_private_key.pem"), PublicKeyID: wxPublicKeyID, Sign: fakewechatpay.SignPublicKey,
		MerchantPublicKey: devkey.Read(t, "wechatpay_merchant_public_key.pem"), MerchantSerial: wxMerchantSerial,
		NotifyURL: notifyURL,
	})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(wx.Handler())
	t.Cleanup(gw.Close)
	t.Cleanup(wx.Close)
	client, err := wechatpay.New(wechatpay.Config{
		MchID: wxMchID, AppID: wxOfficial, AppIDs: []string{wxMini, wxMobile}, APIv3Key: wxAPIv3Key,
		MerchantPrivateKey: devkey.Read(t, "wechatpay_merchant_private_key.pem"), MerchantSerial: wxMerchantSerial,
		PublicKey: devkey.Read(t, "wechatpay_public_key.pem"), PublicKeyID: wxPublicKeyID, Gateway: gw.URL,
	})
	if err != nil {
		t.Fatal(err)
	}
	return wx, wechatpay.NewProvider(client, notifyURL)
}
