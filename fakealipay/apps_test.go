package fakealipay_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/fakealipay"
	"paynotify/internal/devkey"
	"paynotify/model"
)

// A second app, under a second seller, with a key pair of its own.
const (
	otherAppID    = "2021000000000002"
	otherSellerID = "2088000000000002"
)

// The fake serves several apps: each call is checked with its app's key,
// a trade is its opening app's alone, a refund records the app that asked
// it, and notifications name the trade's app and seller.
func TestSeveralApps(t *testing.T) {
	otherKey, otherPub := newKeyPair(t)
	e := newEnv(t, func(c *fakealipay.Config) {
		c.AppPublicKey = devkey.Read(t, "app_public_key.pem")
		c.Apps = []fakealipay.App{{AppID: otherAppID, SellerID: otherSellerID, AppPublicKey: otherPub}}
	})
	client := func(id, seller, key string) *alipay.Client {
		t.Helper()
		c, err := alipay.New(alipay.Config{AppID: id, SellerID: seller, AppPrivateKey: key,
			AlipayPublicKey: devkey.Read(t, "alipay_public_key.pem"), SandboxGateway: e.fake.GatewayURL(e.gw.URL)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx := context.Background()
	// The env's receiver verifies as the first app: the second app's
	// notifications go to a sink of their own.
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "success") }))
	t.Cleanup(sink.Close)
	other := client(otherAppID, otherSellerID, otherKey)
	if _, err := other.Precreate(ctx, "APPS-1", "Order APPS-1", decimal.RequireFromString("6.00"), time.Now().Add(time.Hour), sink.URL); err != nil {
		t.Fatal(err)
	}
	tr, ok := e.fake.Trade("APPS-1")
	if !ok || tr.AppID != otherAppID || tr.SellerID != otherSellerID {
		t.Fatalf("trade %+v (%v), want app %s of %s", tr, ok, otherAppID, otherSellerID)
	}
	if _, err := e.alipay.QueryTrade(ctx, "APPS-1"); !errors.Is(err, model.ErrTradeNotExist) {
		t.Fatalf("the first app queried the second's trade: %v", err)
	}
	forged := client(otherAppID, otherSellerID, devkey.Read(t, "app_private_key.pem"))
	if _, err := forged.QueryTrade(ctx, "APPS-1"); err == nil || errors.Is(err, model.ErrTradeNotExist) {
		t.Fatalf("a call as the second app signed with the first's key: %v, want refused", err)
	}
	if err := e.fake.Pay(ctx, "APPS-1"); err != nil {
		t.Fatal(err)
	}
	notes := e.fake.Notifications()
	if f := notes[len(notes)-1].Form; f.Get("app_id") != otherAppID || f.Get("seller_id") != otherSellerID {
		t.Fatalf("notification names %s/%s", f.Get("app_id"), f.Get("seller_id"))
	}
	tr, _ = e.fake.Trade("APPS-1")
	if err := e.alipay.Refund(ctx, tr.TradeNo, "RF-APPS-1", decimal.RequireFromString("6.00"), "test"); err == nil {
		t.Fatal("the first app refunded the second's trade")
	}
	if err := other.Refund(ctx, tr.TradeNo, "RF-APPS-1", decimal.RequireFromString("6.00"), "test"); err != nil {
		t.Fatal(err)
	}
	tr, _ = e.fake.Trade("APPS-1")
	if len(tr.Refunds) != 1 || tr.Refunds[0].AppID != otherAppID {
		t.Fatalf("refunds %+v, want one asked by %s", tr.Refunds, otherAppID)
	}
}

// newKeyPair is a fresh app key pair, PEM (private PKCS#1, public PKIX).
func newKeyPair(t *testing.T) (private, public string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
}
