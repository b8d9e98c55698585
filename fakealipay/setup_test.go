package fakealipay_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	smartwalle "github.com/smartwalle/alipay/v3"

	"paynotify/alipay"
	"paynotify/fakealipay"
	"paynotify/internal/devkey"
)

// The development merchant of testdata/dev.
const (
	appID    = "2021000000000001"
	sellerID = "2088000000000001"
)

// env is a fake Alipay on a real HTTP server, the service's smartwalle
// client pointed at it, and a notify endpoint that verifies as the service
// does.
type env struct {
	fake *fakealipay.Server
	gw   *httptest.Server
	// alipay is paynotify's client: sdk is its smartwalle client.
	alipay *alipay.Client
	sdk    *smartwalle.Client
	recv   *receiver
}

// newEnv starts an env; edit, if given, adjusts the fake's config.
func newEnv(t *testing.T, edit func(*fakealipay.Config)) *env {
	t.Helper()
	appKey := devkey.Read(t, "app_private_key.pem")
	// Verifying never touches the gateway: the receiver's client needs none.
	e := &env{recv: newReceiver(t, newClient(t, appKey, ""))}
	cfg := fakealipay.Config{
		AppID:      appID,
		SellerID:   sellerID,
		PrivateKey: devkey.Read(t, "alipay_private_key.pem"),
		NotifyURL:  e.recv.srv.URL,
	}
	if edit != nil {
		edit(&cfg)
	}
	fake, err := fakealipay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.fake = fake
	e.gw = httptest.NewServer(fake.Handler())
	// Cleanups run last-in first-out: stop the gateway, then the fake's
	// background notifications, then the receiver (registered earlier).
	t.Cleanup(fake.Close)
	t.Cleanup(e.gw.Close)
	e.alipay = newClient(t, appKey, fake.GatewayURL(e.gw.URL))
	e.sdk = e.alipay.SDK()
	return e
}

// newClient is paynotify's Alipay client in sandbox mode, signing with
// appKey and trusting the stand-in Alipay key.
func newClient(tb testing.TB, appKey, gateway string) *alipay.Client {
	tb.Helper()
	c, err := alipay.New(alipay.Config{
		AppID:           appID,
		SellerID:        sellerID,
		AppPrivateKey:   appKey,
		AlipayPublicKey: devkey.Read(tb, "alipay_public_key.pem"),
		SandboxGateway:  gateway,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// receiver stands in for the service's notify endpoint: it verifies each
// notification with paynotify's VerifyNotification and keeps the valid
// ones.
type receiver struct {
	srv *httptest.Server

	mu     sync.Mutex
	forms  []url.Values
	answer string
}

// newReceiver starts a receiver that answers "success".
func newReceiver(t *testing.T, c *alipay.Client) *receiver {
	t.Helper()
	rc := &receiver{answer: "success"}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Errorf("notification: %v", err)
			return
		}
		if err := c.VerifyNotification(r.Context(), r.PostForm); err != nil {
			t.Errorf("notification refused: %v", err)
			io.WriteString(w, "fail")
			return
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.forms = append(rc.forms, r.PostForm)
		io.WriteString(w, rc.answer)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// Forms returns the valid notifications received, in order.
func (rc *receiver) Forms() []url.Values {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]url.Values(nil), rc.forms...)
}

// Answer sets what the receiver answers a valid notification.
func (rc *receiver) Answer(s string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.answer = s
}

// precreate opens a trade through the service's client.
func (e *env) precreate(t *testing.T, outTradeNo, amount string) *smartwalle.TradePreCreateRsp {
	t.Helper()
	rsp, err := e.sdk.TradePreCreate(context.Background(), smartwalle.TradePreCreate{Trade: smartwalle.Trade{
		Subject: "Espresso beans 1kg", OutTradeNo: outTradeNo, TotalAmount: amount,
	}})
	if err != nil {
		t.Fatalf("precreate %s: %v", outTradeNo, err)
	}
	return rsp
}

// paid opens a trade and has the buyer pay it.
func (e *env) paid(t *testing.T, outTradeNo, amount string) {
	t.Helper()
	if rsp := e.precreate(t, outTradeNo, amount); !rsp.IsSuccess() {
		t.Fatalf("precreate %s: %s %s", outTradeNo, rsp.Code, rsp.SubCode)
	}
	if err := e.fake.Pay(context.Background(), outTradeNo); err != nil {
		t.Fatalf("pay %s: %v", outTradeNo, err)
	}
}

// wantCode fails the test unless a call's answer has code and subCode.
func wantCode(t *testing.T, got smartwalle.Error, code smartwalle.Code, subCode string) {
	t.Helper()
	if got.Code != code || got.SubCode != subCode {
		t.Fatalf("answer %s %s (%s), want %s %s", got.Code, got.SubCode, got.SubMsg, code, subCode)
	}
}
