package handler_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
	"paynotify/model"
	"paynotify/service"
)

// A payment start waiting on a slow Alipay answers by API_TIMEOUT: 503,
// retry later. The start itself goes on in the background (up to its own
// bound), so the retry finds its result instead of starting another.
func TestPayStartAnswersByTheAPIDeadline(t *testing.T) {
	const apiTimeout, slowAlipay, margin = 500 * time.Millisecond, 3 * time.Second, time.Second
	store := daotest.Open(t, dao.DriverSQLite)
	fake, err := fakealipay.New(fakealipay.Config{
		AppID: appID, SellerID: sellerID,
		PrivateKey:   devkey.Read(t, "alipay_private_key.pem"),
		AppPublicKey: devkey.Read(t, "app_public_key.pem"),
		NotifyURL:    "http://127.0.0.1:1" + notifyPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	gateway := httptest.NewServer(fake.Handler())
	t.Cleanup(gateway.Close)
	client, err := alipay.New(alipay.Config{
		AppID: appID, SellerID: sellerID,
		AppPrivateKey:   devkey.Read(t, "app_private_key.pem"),
		AlipayPublicKey: devkey.Read(t, "alipay_public_key.pem"),
		SandboxGateway:  fake.GatewayURL(gateway.URL),
	})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	payments := service.NewPayments(store)
	h := handler.New(handler.Deps{
		Log: log, Verifier: client, Payments: payments, Orders: service.NewOrders(store), JWTSecret: jwtSecret,
		Checkout: service.NewCheckout(store, alipayOnly(client), payments, nil, log),
		DB:       store, Registry: prometheus.NewRegistry(), APITimeout: apiTimeout,
	})
	mustOrder(t, store, "SLOW-1", "10.00")
	fake.TimeoutNext("alipay.trade.precreate", slowAlipay, 1)

	req := httptest.NewRequest(http.MethodPost, payPath("SLOW-1"), strings.NewReader(`{"method":"qr"}`))
	req.Header.Set("Authorization", memberAuth(t, owner))
	req.Header.Set("Idempotency-Key", "slow-1")
	w := httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(w, req)
	took := time.Since(start)
	if w.Code != http.StatusServiceUnavailable || codeOf(t, w.Body.Bytes()) != "unavailable" || w.Header().Get("Retry-After") == "" {
		t.Errorf("pay start past its deadline: %d %s, want 503 unavailable with Retry-After", w.Code, w.Body)
	}
	if took > apiTimeout+margin {
		t.Errorf("pay start answered after %v; API_TIMEOUT is %v (+%v)", took.Round(time.Millisecond), apiTimeout, margin)
	}
	// The start finishes in the background: one precreate, whatever the
	// retries.
	deadline := time.Now().Add(slowAlipay + 10*time.Second)
	for {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, payPath("SLOW-1"), strings.NewReader(`{"method":"qr"}`))
		req.Header.Set("Authorization", memberAuth(t, owner))
		req.Header.Set("Idempotency-Key", "slow-1")
		h.ServeHTTP(w, req)
		if w.Code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pay start never completed: %d %s", w.Code, w.Body)
		}
		time.Sleep(50 * time.Millisecond) // polling the answer, not waiting for time to pass
	}
	if n := fake.Calls("alipay.trade.precreate"); n != 1 {
		t.Errorf("precreate called %d times, want 1", n)
	}
}

// alipayOnly is client as the only provider, its trades notifying a port
// nobody listens on.
func alipayOnly(client *alipay.Client) service.Providers {
	return service.Providers{model.ProviderAlipay: alipay.NewProvider(client, "http://127.0.0.1:1"+notifyPath, "")}
}
