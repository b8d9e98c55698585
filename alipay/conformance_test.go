package alipay_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"paynotify/alipay"
	"paynotify/fakealipay"
	"paynotify/internal/devkey"
	"paynotify/model"
	"paynotify/service/providertest"
)

// The Alipay adapter and its notifications' reader pass the provider
// conformance suite against fakealipay.
func TestConformance(t *testing.T) {
	const appID, sellerID = "2021000000000001", "2088000000000001"
	appKey := devkey.Read(t, "app_private_key.pem")
	// Alipay's notify URL: it answers success, so nothing is resent.
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("success")) }))
	t.Cleanup(recv.Close)
	fake, err := fakealipay.New(fakealipay.Config{AppID: appID, SellerID: sellerID,
		PrivateKey: devkey.Read(t, "alipay_private_key.pem"), AppPublicKey: devkey.Read(t, "app_public_key.pem")})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(fake.Handler())
	t.Cleanup(fake.Close)
	t.Cleanup(gw.Close)
	client, err := alipay.New(alipay.Config{AppID: appID, SellerID: sellerID, AppPrivateKey: appKey,
		AlipayPublicKey: devkey.Read(t, "alipay_public_key.pem"), SandboxGateway: fake.GatewayURL(gw.URL)})
	if err != nil {
		t.Fatal(err)
	}
	apps, err := alipay.NewApps(client)
	if err != nil {
		t.Fatal(err)
	}
	providertest.Test(t, providertest.Harness{
		Name:     model.ProviderAlipay,
		Provider: alipay.NewProvider(client, recv.URL, ""),
		Notices:  apps,
		Fake:     alipayFake{fake, appKey, devkey.Read(t, "alipay_private_key.pem")},
		Method:   model.PayQR,
		Account:  sellerID, App: appID,
	})
}

// alipayFake is fakealipay as the conformance suite drives it.
type alipayFake struct {
	*fakealipay.Server
	// appKey is the merchant's private key: not Alipay's, so what it
	// signs is forged. alipayKey is Alipay's (the fake's).
	appKey, alipayKey string
}

// Notice is the last notification of outTradeNo's payment the fake
// posted, edited by f.
func (a alipayFake) Notice(_ context.Context, outTradeNo string, f providertest.Forgery) (http.Header, []byte, error) {
	var form url.Values
	for _, n := range a.Notifications() {
		if n.Form.Get("out_trade_no") == outTradeNo && n.Form.Get("trade_status") == string(alipay.TradeSuccess) {
			form = n.Form
		}
	}
	if form == nil {
		return nil, nil, fmt.Errorf("fakealipay sent no notification of %s's payment", outTradeNo)
	}
	var err error
	switch f {
	case providertest.BadSignature:
		form, err = alipay.SignForm(a.appKey, form)
	case providertest.TamperedAmount:
		form.Set("total_amount", "0.01")
	case providertest.WrongApp:
		form.Set("app_id", "2021000000000999")
		form, err = alipay.SignForm(a.alipayKey, form)
	}
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded; charset=utf-8"}}
	return h, []byte(form.Encode()), err
}
