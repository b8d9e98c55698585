package service_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/fakealipay"
	"paynotify/handler"
	"paynotify/internal/devkey"
	"paynotify/internal/racetest"
	"paynotify/model"
	"paynotify/service"
)

// The apps of appsRig: two under one seller, one under a second seller.
const (
	appWeb, appMobile, appGroup = "2021000000000011", "2021000000000012", "2021000000000021"
	sellerOne, sellerTwo        = "2088000000000011", "2088000000000021"
)

// appKey is one app's key pair, PEM.
type appKey struct{ private, public string }

// newAppKey makes a fresh RSA key pair for an app.
func newAppKey(t *testing.T) appKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return appKey{
		private: string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})),
		public:  string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})),
	}
}

// appsRig is the service over three Alipay apps, each its own client with
// its own key pair, against one fake Alipay that serves all three and
// checks each app's calls with that app's key; the fake's notifications
// reach the real handler, which routes them by app_id.
type appsRig struct {
	store     *dao.Store
	fake      *fakealipay.Server
	keys      map[string]appKey
	clients   map[string]*alipay.Client
	payments  *service.Payments
	refunds   *service.Refunds
	checkout  *service.Checkout
	providers service.Providers
	notifyURL string
	gateway   string
}

func newAppsRig(t *testing.T, store *dao.Store) *appsRig {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &appsRig{store: store, notifyURL: "http://" + ln.Addr().String() + "/alipay/notify",
		keys: map[string]appKey{}, clients: map[string]*alipay.Client{}}
	for _, id := range []string{appWeb, appMobile, appGroup} {
		r.keys[id] = newAppKey(t)
	}
	r.fake, err = fakealipay.New(fakealipay.Config{
		AppID: appWeb, SellerID: sellerOne, AppPublicKey: r.keys[appWeb].public,
		Apps: []fakealipay.App{
			{AppID: appMobile, SellerID: sellerOne, AppPublicKey: r.keys[appMobile].public},
			{AppID: appGroup, SellerID: sellerTwo, AppPublicKey: r.keys[appGroup].public},
		},
		PrivateKey: devkey.Read(t, "alipay_private_key.pem"),
		NotifyURL:  r.notifyURL,
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	gateway := httptest.NewServer(r.fake.Handler())
	r.gateway = r.fake.GatewayURL(gateway.URL)
	var set []service.App
	var clients []*alipay.Client
	for _, a := range []struct{ id, seller, name string }{{appWeb, sellerOne, "web"}, {appMobile, sellerOne, "mobile"}, {appGroup, sellerTwo, "group"}} {
		c := r.client(t, a.id, a.seller, r.keys[a.id].private)
		r.clients[a.id] = c
		clients = append(clients, c)
		app := service.App{Provider: model.ProviderAlipay, Account: a.seller, ID: a.id, Name: a.name,
			Adapter: alipay.NewProvider(c, r.notifyURL, "https://shop.example/paid")}
		if a.name == "mobile" {
			app.Methods = []model.PayMethod{model.PayWap, model.PayQR}
		}
		set = append(set, app)
	}
	apps, err := alipay.NewApps(clients...)
	if err != nil {
		t.Fatal(err)
	}
	providers := service.Providers{model.ProviderAlipay: service.NewAppSet(set...)}
	r.providers = providers
	r.payments = service.NewPayments(store)
	r.refunds = service.NewRefunds(store, providers, quietLog)
	r.checkout = service.NewCheckout(store, providers, r.payments, nil, quietLog)
	notify := httptest.NewUnstartedServer(handler.New(handler.Deps{
		Log: quietLog, Verifier: apps, Payments: r.payments, Refunds: r.refunds,
		DB: store, Registry: prometheus.NewRegistry(),
	}))
	notify.Listener.Close()
	notify.Listener = ln
	notify.Start()
	t.Cleanup(notify.Close)
	t.Cleanup(gateway.Close)
	t.Cleanup(r.fake.Close)
	return r
}

// client is an Alipay client of app id under seller signing with key.
func (r *appsRig) client(t *testing.T, id, seller, key string) *alipay.Client {
	t.Helper()
	c, err := alipay.New(alipay.Config{AppID: id, SellerID: seller, AppPrivateKey: key,
		AlipayPublicKey: devkey.Read(t, "alipay_public_key.pem"), SandboxGateway: r.gateway})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// post posts a notification form, signed with the fake Alipay's key, to
// the notify endpoint and returns the answer.
func (r *appsRig) post(t *testing.T, form url.Values) string {
	t.Helper()
	signed, err := alipay.SignForm(devkey.Read(t, "alipay_private_key.pem"), form)
	if err != nil {
		t.Fatal(err)
	}
	rsp, err := http.PostForm(r.notifyURL, signed)
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	b, err := io.ReadAll(rsp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every app's payment is applied once, recorded with its account and app;
// a resend is a duplicate; the trade is the app's alone (another app's
// query does not find it, a call signed with another app's key fails).
func TestAlipayAppsEachApplied(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newAppsRig(t, store)
		for _, tc := range []struct{ ref, id, seller string }{
			{"", appWeb, sellerOne}, {"mobile", appMobile, sellerOne}, {appGroup, appGroup, sellerTwo},
		} {
			t.Run("App"+tc.id, func(t *testing.T) {
				sn := newSN("APP")
				o := mustOrder(t, store, sn, "12.00")
				v, err := r.checkout.StartIn(ctx, rigMember, sn, model.ProviderAlipay, model.PayQR, tc.ref, model.Payer{})
				if err != nil {
					t.Fatal(err)
				}
				if v.Account != tc.seller || v.App != tc.id {
					t.Fatalf("started in %s/%s, want %s/%s", v.Account, v.App, tc.seller, tc.id)
				}
				if tr, ok := r.fake.Trade(sn); !ok || tr.AppID != tc.id {
					t.Fatalf("the fake has the trade in app %q (%v), want %s", tr.AppID, ok, tc.id)
				}
				if err := r.fake.Pay(ctx, sn); err != nil {
					t.Fatal(err)
				}
				notes := r.fake.Notifications()
				if err := r.fake.Resend(ctx, len(notes)-1); err != nil {
					t.Fatal(err)
				}
				got := mustGetOrder(t, store, sn)
				pays := mustPayments(t, store, o.ID)
				if got.Status != model.OrderPaid || len(pays) != 1 || pays[0].State != model.PaymentApplied {
					t.Fatalf("order status %d, payments %+v: want paid once", got.Status, pays)
				}
				if pays[0].Account != tc.seller || pays[0].App != tc.id {
					t.Fatalf("payment recorded in %q/%q, want %s/%s", pays[0].Account, pays[0].App, tc.seller, tc.id)
				}
				// Another app does not find the trade; this app's id with
				// another app's key is refused.
				for id, c := range r.clients {
					if id == tc.id {
						continue
					}
					if _, err := c.QueryTrade(ctx, sn); !errors.Is(err, model.ErrTradeNotExist) {
						t.Errorf("app %s queried app %s's trade: %v", id, tc.id, err)
					}
				}
				other := appWeb
				if tc.id == appWeb {
					other = appMobile
				}
				forged := r.client(t, tc.id, tc.seller, r.keys[other].private)
				if _, err := forged.QueryTrade(ctx, sn); err == nil || errors.Is(err, model.ErrTradeNotExist) {
					t.Errorf("a query as app %s signed with app %s's key: %v, want refused", tc.id, other, err)
				}
			})
		}
	})
}

// A notification for an app not configured, or for our app under another
// seller, is refused (failure) and writes nothing.
func TestAlipayUnknownAppRefused(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newAppsRig(t, store)
		for _, tc := range []struct{ name, app, seller string }{
			{"UnknownApp", "2021000000000999", sellerOne},
			{"AppUnderAnotherSeller", appGroup, sellerOne},
		} {
			t.Run(tc.name, func(t *testing.T) {
				sn := newSN("UNK")
				o := mustOrder(t, store, sn, "5.00")
				form := url.Values{
					"notify_type": {"trade_status_sync"}, "notify_id": {"n-" + sn}, "notify_time": {"2026-11-30 12:00:00"},
					"app_id": {tc.app}, "seller_id": {tc.seller}, "charset": {"utf-8"}, "version": {"1.0"},
					"trade_no": {"2026113022001" + sn}, "out_trade_no": {sn}, "trade_status": {"TRADE_SUCCESS"},
					"total_amount": {"5.00"}, "gmt_payment": {alipay.FormatTime(time.Now().Add(-time.Minute))},
				}
				if answer := r.post(t, form); answer != "failure" {
					t.Fatalf("answer %q, want failure", answer)
				}
				if pays := mustPayments(t, store, o.ID); len(pays) != 0 {
					t.Fatalf("payments recorded: %+v", pays)
				}
				if got := mustGetOrder(t, store, sn); got.Status != model.OrderAwaitingPayment {
					t.Fatalf("order status %d", got.Status)
				}
			})
		}
	})
}

// One order paid in two apps (its first trade's close was lost, so both
// trades stayed open and the buyer paid both): one APPLIED, the other
// refunded through the app that took it, with that app's key.
func TestAlipayOrderPaidInTwoApps(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newAppsRig(t, store)
		sn := newSN("TWO")
		o := mustOrder(t, store, sn, "30.00")
		if _, err := r.checkout.StartIn(ctx, rigMember, sn, model.ProviderAlipay, model.PayQR, "web", model.Payer{}); err != nil {
			t.Fatal(err)
		}
		// Alipay says the first trade does not exist (not visible yet):
		// the switch records it closed, and it stays open at Alipay.
		r.fake.FailNext(fakealipay.MethodClose, "40004", "ACQ.TRADE_NOT_EXIST", 1)
		v, err := r.checkout.StartIn(ctx, rigMember, sn, model.ProviderAlipay, model.PayQR, "group", model.Payer{})
		if err != nil {
			t.Fatal(err)
		}
		if v.App != appGroup || v.AttemptNo != 2 {
			t.Fatalf("second start %+v", v)
		}
		if err := r.fake.Pay(ctx, v.OutTradeNo); err != nil {
			t.Fatal(err)
		}
		if err := r.fake.Pay(ctx, sn); err != nil {
			t.Fatal(err)
		}
		pays := mustPayments(t, store, o.ID)
		racetest.PaidOnce(t, sn, mustGetOrder(t, store, sn), pays)
		refundAll(t, r.refunds)
		var owed model.Payment
		for _, p := range pays {
			if p.State != model.PaymentApplied {
				owed = p
			}
		}
		if owed.App != appWeb || owed.Account != sellerOne {
			t.Fatalf("the payment owed back is %+v, want web's", owed)
		}
		web, _ := r.fake.Trade(sn)
		if len(web.Refunds) != 1 || web.Refunds[0].AppID != appWeb || !web.Refunds[0].Amount.Equal(owed.Amount) {
			t.Fatalf("web's trade refunds: %+v, want one by app %s", web.Refunds, appWeb)
		}
		group, _ := r.fake.Trade(v.OutTradeNo)
		if len(group.Refunds) != 0 {
			t.Fatalf("the applied payment was refunded: %+v", group.Refunds)
		}
		if p, err := store.Payment(ctx, model.ProviderAlipay, owed.TradeNo); err != nil || p.State != model.PaymentRefunded {
			t.Fatalf("owed payment now %+v %v", p, err)
		}
	})
}

// Starting a payment names its app by name or id; absent, the first app
// that takes the method; an unknown app, or one that cannot take the
// method, is a bad request naming it.
func TestStartInApp(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newAppsRig(t, store)
		for _, tc := range []struct {
			name, ref string
			method    model.PayMethod
			app, bad  string
		}{
			{"Default", "", model.PayQR, appWeb, ""},
			{"ByName", "mobile", model.PayWap, appMobile, ""},
			{"ByID", appGroup, model.PayPage, appGroup, ""},
			{"Unknown", "kiosk", model.PayQR, "", `has no app "kiosk"`},
			{"MethodNotTaken", "mobile", model.PayPage, "", `app "mobile" (` + appMobile + `) takes no method "page"`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				sn := newSN("IN")
				mustOrder(t, store, sn, "3.00")
				v, err := r.checkout.StartIn(ctx, rigMember, sn, model.ProviderAlipay, tc.method, tc.ref, model.Payer{})
				if tc.bad != "" {
					if !errors.Is(err, model.ErrInvalidRequest) || !strings.Contains(err.Error(), tc.bad) {
						t.Fatalf("err %v, want a bad request saying %q", err, tc.bad)
					}
					return
				}
				if err != nil || v.App != tc.app {
					t.Fatalf("view %+v %v, want app %s", v, err, tc.app)
				}
				a, err := store.LatestAttempt(ctx, mustGetOrder(t, store, sn).ID)
				if err != nil || a.App != tc.app {
					t.Fatalf("attempt %+v %v", a, err)
				}
			})
		}
	})
}

// A bill covers one seller: a run over the first seller's bill compares
// only that seller's payments (and the rows written before the ledger knew
// sellers) with it. The second seller's payment, absent from this bill, is
// not reported missing; the first seller's is.
func TestReconcileComparesTheBillsAccountOnly(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newReconRig(t, store)
		observe := func(sn, tradeNo, account, app string) {
			t.Helper()
			r.order(t, sn, "8.00")
			at := r.clock.Now().UTC()
			if _, _, err := r.payments.Observe(ctx, model.Observation{Provider: model.ProviderAlipay, Account: account, App: app,
				Ref: "n-" + tradeNo, OutTradeNo: sn, TradeNo: tradeNo, Amount: dec("8.00"), PaidAt: &at}); err != nil {
				t.Fatal(err)
			}
		}
		observe("RA-FIRST", "2026113022001400000000000301", rigSellerID, rigAppID)
		observe("RA-LEGACY", "2026113022001400000000000302", "", "")
		observe("RA-SECOND", "2026113022001400000000000303", sellerTwo, appGroup)
		r.recon.Accounts = []string{"", rigSellerID}
		run := r.run(t, r.recon, reconDay)
		if run.Counts[model.ReconMissingAtProvider] != 2 {
			t.Fatalf("run %+v, want the first seller's two payments missing", run)
		}
		for _, it := range r.items(t, reconDay, model.ReconMissingAtProvider) {
			if it.TradeNo == "2026113022001400000000000303" {
				t.Fatalf("the second seller's payment was compared with the first's bill: %+v", it)
			}
		}
	})
}

// The query and close jobs ask each attempt's own app: a trade lost in
// the mobile app is found by the mobile app's query (another app's would
// not find it) and recorded as that app's; an abandoned trade of the
// second seller's app is closed at the fake by that app — closed there,
// not merely here (another app's close finds no trade and closes nothing).
func TestAppsQueryAndCloseInTheirApp(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		r := newAppsRig(t, store)
		trades := service.NewOpenTrades(store, r.providers, r.payments, quietLog)

		lost := newSN("LOST")
		o := mustOrder(t, store, lost, "7.00")
		if _, err := r.checkout.StartIn(ctx, rigMember, lost, model.ProviderAlipay, model.PayQR, "mobile", model.Payer{}); err != nil {
			t.Fatal(err)
		}
		r.fake.LoseNotifications(true)
		if err := r.fake.Pay(ctx, lost); err != nil {
			t.Fatal(err)
		}
		r.fake.LoseNotifications(false)
		queryNow(t, store, mustAttempt(t, store, lost))
		if n, err := trades.QueryDue(ctx); err != nil || n != 1 {
			t.Fatalf("QueryDue = %d, %v; want the mobile app's trade found paid", n, err)
		}
		if pays := mustPayments(t, store, o.ID); len(pays) != 1 || pays[0].State != model.PaymentApplied || pays[0].App != appMobile || pays[0].Account != sellerOne {
			t.Fatalf("payments %+v, want one APPLIED in the mobile app", pays)
		}

		abandoned := newSN("ABND")
		b := mustOrder(t, store, abandoned, "9.00")
		if _, err := r.checkout.StartIn(ctx, rigMember, abandoned, model.ProviderAlipay, model.PayQR, "group", model.Payer{}); err != nil {
			t.Fatal(err)
		}
		if err := store.UpdateOrder(ctx, dao.OrderID(b.ID), dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
			_, err := tx.CloseOrder(ctx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if n, err := trades.CloseAbandoned(ctx); err != nil || n != 1 {
			t.Fatalf("CloseAbandoned = %d, %v; want the group app's trade closed", n, err)
		}
		if tr, ok := r.fake.Trade(abandoned); !ok || tr.Status != alipay.TradeClosed || tr.AppID != appGroup {
			t.Fatalf("the fake's trade %+v (%v): want closed, in the group app", tr, ok)
		}
	})
}
