package service_test

import (
	"net"
	"net/http/httptest"
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
)

// wxMerchant is one WeChat Pay merchant of a test: its fake and the
// service's provider of it, both with its own APIv3 key.
type wxMerchant struct {
	mchID string
	fake  *fakewechatpay.Server
	p     *wechatpay.Provider
}

// newWxMerchant starts a fake WeChat Pay merchant of appIDs that notifies
// notifyURL, and the provider that speaks to it. Every merchant here is
// verified with the same WeChat Pay public key and serial: the serial is
// shared, so the merchant is found by whose APIv3 key opens the notice.
func newWxMerchant(t *testing.T, mchID, apiV3Key, notifyURL string, appIDs ...string) wxMerchant {
	t.Helper()
	fake, err := fakewechatpay.New(fakewechatpay.Config{
		MchID: mchID, AppID: appIDs[0], AppIDs: appIDs[1:], APIv3Key: apiV3Key,
		PrivateKey: devkey.Read(t, "wechatpay_private_key.pem"), PublicKeyID: wxPublicKeyID, Sign: fakewechatpay.SignPublicKey,
		MerchantPublicKey: devkey.Read(t, "wechatpay_merchant_public_key.pem"), MerchantSerial: wxMerchantSerial,
		NotifyURL: notifyURL,
	})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(fake.Handler())
	t.Cleanup(gw.Close)
	t.Cleanup(fake.Close)
	client, err := wechatpay.New(wechatpay.Config{
		MchID: mchID, AppID: appIDs[0], AppIDs: appIDs[1:], APIv3Key: apiV3Key,
		MerchantPrivateKey: devkey.Read(t, "wechatpay_merchant_private_key.pem"), MerchantSerial: wxMerchantSerial,
		PublicKey: devkey.Read(t, "wechatpay_public_key.pem"), PublicKeyID: wxPublicKeyID, Gateway: gw.URL,
	})
	if err != nil {
		t.Fatal(err)
	}
	return wxMerchant{mchID: mchID, fake: fake, p: wechatpay.NewProvider(client, notifyURL)}
}

// Two WeChat Pay merchants (two companies of a group) behind one notify
// URL: each merchant's notice is taken by that merchant and recorded
// under its mchid; one order paid once in each merchant is one APPLIED
// payment and the other refunded through the merchant that took it, at
// that merchant's fake only; and each merchant's bill is its own run.
func TestWeChatPayTwoMerchants(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		notifyURL := "http://" + ln.Addr().String() + "/wechatpay/notify"
		const mchA, mchB = "1900000091", "1900000092"
		a := newWxMerchant(t, mchA, "merchant-a-apiv3-key-0123456789a", notifyURL, wxOfficial, wxMini)
		b := newWxMerchant(t, mchB, "merchant-b-apiv3-key-0123456789b", notifyURL, wxMobile)
		set := service.NewAppSet(
			service.App{Provider: model.ProviderWechatpay, Account: mchA, ID: wxOfficial, Name: "official", Adapter: a.p},
			service.App{Provider: model.ProviderWechatpay, Account: mchA, ID: wxMini, Name: "miniprogram", Adapter: a.p.ForApp(wxMini)},
			service.App{Provider: model.ProviderWechatpay, Account: mchB, ID: wxMobile, Name: "group", Adapter: b.p},
		)
		providers := service.Providers{model.ProviderWechatpay: set}
		payments := service.NewPayments(store)
		refunds := service.NewRefunds(store, providers, quietLog)
		checkout := service.NewCheckout(store, providers, payments, nil, quietLog)
		notify := httptest.NewUnstartedServer(handler.New(handler.Deps{
			Log: quietLog, WeChatPay: wechatpay.Merchants{a.p, b.p}, Payments: payments, Refunds: refunds, DB: store, Registry: prometheus.NewRegistry(),
		}))
		notify.Listener.Close()
		notify.Listener = ln
		notify.Start()
		t.Cleanup(notify.Close)

		pay := func(sn, app string, m wxMerchant) service.PayView {
			t.Helper()
			v, err := checkout.StartIn(ctx, rigMember, sn, model.ProviderWechatpay, model.PayNative, app, model.Payer{})
			if err != nil {
				t.Fatal(err)
			}
			if v.Account != m.mchID {
				t.Fatalf("started in %s, want %s", v.Account, m.mchID)
			}
			if err := m.fake.Pay(ctx, v.OutTradeNo); err != nil {
				t.Fatal(err)
			}
			return v
		}
		for _, c := range []struct {
			app string
			m   wxMerchant
		}{{"official", a}, {"group", b}} {
			sn := newSN("WXM")
			o := mustOrder(t, store, sn, "6.00")
			pay(sn, c.app, c.m)
			if pays := mustPayments(t, store, o.ID); len(pays) != 1 || pays[0].State != model.PaymentApplied || pays[0].Account != c.m.mchID {
				t.Fatalf("%s: payments %+v, want one APPLIED under %s", c.app, pays, c.m.mchID)
			}
		}

		// Paid in both merchants: the first trade's close is lost (WeChat
		// Pay answers as if it closed, the buyer pays it anyway).
		sn := newSN("WXB")
		o := mustOrder(t, store, sn, "8.00")
		first, err := checkout.StartIn(ctx, rigMember, sn, model.ProviderWechatpay, model.PayNative, "official", model.Payer{})
		if err != nil {
			t.Fatal(err)
		}
		a.fake.FailNext("close", 404, "ORDER_NOT_EXIST", 1) // not visible yet: recorded closed here, open there
		second, err := checkout.StartIn(ctx, rigMember, sn, model.ProviderWechatpay, model.PayNative, "group", model.Payer{})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.fake.Pay(ctx, second.OutTradeNo); err != nil {
			t.Fatal(err)
		}
		if err := a.fake.Pay(ctx, first.OutTradeNo); err != nil {
			t.Fatal(err)
		}
		refundAll(t, refunds)
		pays := mustPayments(t, store, o.ID)
		applied, refunded := 0, 0
		for _, p := range pays {
			switch {
			case p.State == model.PaymentApplied && p.Account == mchB:
				applied++
			case (p.State == model.PaymentRefunding || p.State == model.PaymentRefunded) && p.Account == mchA:
				refunded++ // asked of merchant A (settled there later)
			}
		}
		if len(pays) != 2 || applied != 1 || refunded != 1 {
			t.Fatalf("payments %+v: want B's APPLIED and A's refunded", pays)
		}
		fs, err := store.RefundsByOrder(ctx, o.ID)
		if err != nil || len(fs) != 1 {
			t.Fatalf("refunds %+v %v, want one", fs, err)
		}
		if f, ok := a.fake.Refund(fs[0].OutRequestNo); !ok || f.OutTradeNo != first.OutTradeNo || f.Refund != 800 {
			t.Fatalf("merchant A's refund %+v (%v): want 8.00 of its trade", f, ok)
		}
		if _, ok := b.fake.Refund(fs[0].OutRequestNo); ok {
			t.Fatal("merchant B was asked the refund of merchant A's payment")
		}

		// A run per merchant, each over its own bill.
		recons := service.NewReconcilers(store, providers, payments, quietLog)[model.ProviderWechatpay]
		if len(recons) != 2 || recons[0].Account != mchA || recons[1].Account != mchB {
			t.Fatalf("reconcilers %+v", recons)
		}
		date := time.Now().In(model.Beijing).Format(time.DateOnly)
		want := map[string]int{mchA: 2, mchB: 2}
		for _, rec := range recons {
			rec.SetClock(func() time.Time { return time.Now().Add(24 * time.Hour) })
			run, err := rec.Run(ctx, date)
			if err != nil {
				t.Fatal(err)
			}
			if run.Account != rec.Account || run.State != model.ReconDone || run.Bill.Payments != want[rec.Account] ||
				run.Ledger.Payments != want[rec.Account] || run.Counts[model.ReconMissingAtProvider] != 0 {
				t.Errorf("run of %s: %+v, want its own %d payments, nothing missing", rec.Account, run, want[rec.Account])
			}
		}

		// Money for no order of ours, taken by merchant B: recorded
		// UNMATCHED under B, and refunded by B — not asked of the first
		// merchant, who has no such trade.
		stray := newSN("WXSTRAY")
		if _, err := b.p.StartPayment(ctx, model.PayStart{OutTradeNo: stray, Subject: "stray", Amount: decimal.RequireFromString("4.00"),
			Method: model.PayNative, ExpireAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := b.fake.Pay(ctx, stray); err != nil {
			t.Fatal(err)
		}
		tr, _ := b.fake.Trade(stray)
		if p, err := store.Payment(ctx, model.ProviderWechatpay, tr.TransactionID); err != nil || p.State != model.PaymentUnmatched || p.Account != mchB {
			t.Fatalf("the stray payment %+v, %v: want UNMATCHED under %s", p, err, mchB)
		}
		if _, err := refunds.RefundUnmatched(ctx, model.ProviderWechatpay, tr.TransactionID, "ops-stray-1"); err != nil {
			t.Fatal(err)
		}
		refundAll(t, refunds)
		f, err := store.Refund(ctx, "RP-"+tr.TransactionID)
		if err != nil || f.Account != mchB || f.State == model.RefundFailed { // REFUNDING: WeChat Pay settles it later
			t.Fatalf("the stray payment's refund %+v, %v: want it asked of %s", f, err, mchB)
		}
		if _, ok := b.fake.Refund(f.OutRequestNo); !ok {
			t.Errorf("merchant B was not asked the refund %s", f.OutRequestNo)
		}
	})
}
