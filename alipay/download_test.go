package alipay_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/fakealipay"
	"paynotify/internal/devkey"
	"paynotify/internal/netguard"
	"paynotify/model"
)

// TestBillDownloadRefusesPrivateAddresses: a bill URL is Alipay's word,
// and a client whose gateway is not a fake dials it only at a public
// address. The fake serves its bill from 127.0.0.1, so the download is
// refused before it is dialled, and the day's run fails with the one
// error that names no port's state.
func TestBillDownloadRefusesPrivateAddresses(t *testing.T) {
	fake, err := fakealipay.New(fakealipay.Config{
		AppID: "2021000000000001", SellerID: "2088000000000001",
		PrivateKey: devkey.Read(t, "alipay_private_key.pem"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	gw := httptest.NewServer(fake.Handler())
	t.Cleanup(gw.Close)
	c, err := alipay.New(alipay.Config{
		AppID: "2021000000000001", SellerID: "2088000000000001",
		AppPrivateKey:   devkey.Read(t, "app_private_key.pem"),
		AlipayPublicKey: devkey.Read(t, "alipay_public_key.pem"),
		SandboxGateway:  fake.GatewayURL(gw.URL),
	})
	if err != nil {
		t.Fatal(err)
	}
	day := time.Now().In(model.Beijing).AddDate(0, 0, -1)
	fake.AddPaidTrade("SN-1", "2026113022001400000000000001", decimal.RequireFromString("1.00"), day)

	b, err := c.TradeBill(context.Background(), day)
	if err != nil {
		t.Fatalf("the fake's own client: %v", err)
	}
	b.Close()

	c.GuardDownloads()
	_, err = c.TradeBill(context.Background(), day)
	if !errors.Is(err, model.ErrGatewayUnknown) || !strings.Contains(err.Error(), netguard.ErrRefused.Error()) {
		t.Fatalf("download from 127.0.0.1: %v, want the refusal", err)
	}
}
