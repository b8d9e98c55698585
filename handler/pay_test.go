package handler_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
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

const payAdminToken = "pay-test-admin-token"

// The members of the pay cases: owner places the orders (mustOrder's
// member), stranger does not own them.
const (
	owner    int64 = 7
	stranger int64 = 8
)

// cashier is the whole service on a real HTTP server, talking to a fake
// Alipay through the real client, which also verifies the fake's
// notifications posted back to the server.
type cashier struct {
	store *dao.Store
	fake  *fakealipay.Server
	url   string // the service's base URL
	// routes is handler.New's answer with every part switched on, before
	// the test's OpenAPI check wraps it.
	routes http.Handler
	// recon is the reconciliation behind /admin/reconciliations, Alipay's;
	// wxRecon WeChat Pay's, whose bills are empty.
	recon, wxRecon *service.BillReconciler
	// reloader answers POST /admin/reload.
	reloader *reloaderAnswers
}

// emptyBill is a bill with no lines.
type emptyBill struct{}

func (emptyBill) BillTotals() model.BillTotals              { return model.BillTotals{} }
func (emptyBill) Entries(func(model.BillEntry) error) error { return nil }
func (emptyBill) Close() error                              { return nil }

func newCashier(t *testing.T, store *dao.Store) *cashier {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cashier{store: store, url: "http://" + ln.Addr().String(), reloader: &reloaderAnswers{}}
	c.fake, err = fakealipay.New(fakealipay.Config{
		AppID: appID, SellerID: sellerID,
		PrivateKey:   devkey.Read(t, "alipay_private_key.pem"),
		AppPublicKey: devkey.Read(t, "app_public_key.pem"),
		NotifyURL:    c.url + notifyPath,
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	gateway := httptest.NewServer(c.fake.Handler())
	client, err := alipay.New(alipay.Config{
		AppID: appID, SellerID: sellerID,
		AppPrivateKey:   devkey.Read(t, "app_private_key.pem"),
		AlipayPublicKey: devkey.Read(t, "alipay_public_key.pem"),
		SandboxGateway:  c.fake.GatewayURL(gateway.URL),
	})
	if err != nil {
		ln.Close()
		gateway.Close()
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	payments := service.NewPayments(store)
	providers := service.Providers{model.ProviderAlipay: alipay.NewProvider(client, c.url+notifyPath, "")}
	c.recon = service.NewBillReconciler(store, providers[model.ProviderAlipay], payments, log)
	c.wxRecon = service.NewBillReconciler(store, service.BillSourceFunc(func(context.Context, time.Time) (model.Bill, error) {
		return emptyBill{}, nil
	}), payments, log)
	c.wxRecon.Provider = model.ProviderWechatpay
	c.routes = handler.New(handler.Deps{
		Log:        log,
		Verifier:   client,
		Payments:   payments,
		Orders:     service.NewOrders(store),
		JWTSecret:  jwtSecret,
		AdminToken: payAdminToken,
		Dashboard:  service.NewDashboard(store), Queues: service.NewQueues(store), Lookup: service.NewLookup(store),
		Checkout:        service.NewCheckout(store, providers, payments, nil, log),
		Refunds:         service.NewRefunds(store, providers, log),
		BillReconcilers: service.Reconcilers{model.ProviderAlipay: {c.recon}, model.ProviderWechatpay: {c.wxRecon}},
		Webhooks:        service.NewWebhooks(store, nil),
		Reloader:        c.reloader,
		DB:              store,
		Registry:        prometheus.NewRegistry(),
	})
	srv := httptest.NewUnstartedServer(validated(t, c.routes))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(gateway.Close)
	t.Cleanup(c.fake.Close)
	return c
}

// post sends a JSON POST to path with the Authorization header auth and
// the Idempotency-Key key (each left out if empty).
func (c *cashier) post(t *testing.T, path, auth, key, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// memberAuth is the Authorization header of a member.
func memberAuth(t *testing.T, member int64) string {
	t.Helper()
	tok, err := handler.MemberToken(jwtSecret, member, time.Hour)
	if err != nil {
		t.Fatalf("MemberToken: %v", err)
	}
	return "Bearer " + tok
}

// codeOf is the code of an API error body.
func codeOf(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error answer %q: %v", body, err)
	}
	return e.Error.Code
}

// payPath is the pay endpoint of an order.
func payPath(sn string) string { return "/api/v1/orders/" + sn + "/pay" }

// mustPay starts paying sn by method as its owner and returns the view.
func (c *cashier) mustPay(t *testing.T, sn, method, key string) service.PayView {
	t.Helper()
	status, _, body := c.post(t, payPath(sn), memberAuth(t, owner), key, `{"method":"`+method+`"}`)
	if status != http.StatusOK {
		t.Fatalf("pay %s by %s: %d %s, want 200", sn, method, status, body)
	}
	var v service.PayView
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return v
}

// POST /api/v1/orders/{sn}/pay: the pay URL or QR code for the member's
// own order, the same again for the same method, and every refusal with
// its status and code.
func TestPayAPI(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		c := newCashier(t, store)

		t.Run("Page", func(t *testing.T) {
			o := mustOrder(t, store, "PAY-PAGE", "100.00")
			v := c.mustPay(t, o.OrderSN, "page", "k-1")
			if v.PayURL == "" || v.QRCode != "" || v.Method != "page" || v.AttemptNo != 1 ||
				v.OutTradeNo != o.OrderSN || v.Amount != "100.00" || v.OrderSN != o.OrderSN {
				t.Fatalf("answer %+v, want attempt 1 with a pay_url for 100.00", v)
			}
			// Another key, the same method: the same answer.
			if again := c.mustPay(t, o.OrderSN, "page", "k-2"); !reflect.DeepEqual(again, v) {
				t.Fatalf("second answer %+v, want %+v", again, v)
			}
		})

		t.Run("QR", func(t *testing.T) {
			o := mustOrder(t, store, "PAY-QR", "12.50")
			v := c.mustPay(t, o.OrderSN, "qr", "k-1")
			if v.QRCode == "" || v.PayURL != "" || v.Method != "qr" || v.Amount != "12.50" {
				t.Fatalf("answer %+v, want a qr_code for 12.50", v)
			}
			if tr, ok := c.fake.Trade(o.OrderSN); !ok || tr.Status != alipay.TradeWaitBuyerPay {
				t.Fatalf("trade at Alipay: %v %+v, want one waiting for the buyer", ok, tr)
			}
		})

		paidSN := "PAY-PAID"
		mustOrder(t, store, paidSN, "10.00")
		c.mustPay(t, paidSN, "qr", "k-paid")
		if err := c.fake.Pay(t.Context(), paidSN); err != nil {
			t.Fatal(err)
		}
		if got := mustGetOrder(t, store, paidSN); got.Status != model.OrderPaid {
			t.Fatalf("order %s after paying, want PAID", got.Status)
		}
		closedSN := "PAY-CLOSED"
		mustOrder(t, store, closedSN, "10.00")
		closeOrder(t, store, closedSN)
		openSN := "PAY-OPEN"
		mustOrder(t, store, openSN, "10.00")

		cases := []struct {
			name, sn, auth, key, body string
			fault                     func()
			status                    int
			code                      string
			retryAfter                bool
		}{
			{name: "MissingIdempotencyKey", sn: openSN, auth: memberAuth(t, owner), body: `{"method":"page"}`,
				status: http.StatusBadRequest, code: "invalid_request"},
			{name: "BadMethod", sn: openSN, auth: memberAuth(t, owner), key: "k", body: `{"method":"card"}`,
				status: http.StatusBadRequest, code: "invalid_request"},
			{name: "NoMethod", sn: openSN, auth: memberAuth(t, owner), key: "k", body: `{}`,
				status: http.StatusBadRequest, code: "invalid_request"},
			{name: "UnknownField", sn: openSN, auth: memberAuth(t, owner), key: "k", body: `{"method":"page","amount":"0.01"}`,
				status: http.StatusBadRequest, code: "invalid_request"},
			{name: "NoToken", sn: openSN, key: "k", body: `{"method":"page"}`,
				status: http.StatusUnauthorized, code: "unauthorized"},
			{name: "AnotherMembersOrder", sn: openSN, auth: memberAuth(t, stranger), key: "k", body: `{"method":"page"}`,
				status: http.StatusNotFound, code: "order_not_found"},
			{name: "UnknownOrder", sn: "PAY-NOPE", auth: memberAuth(t, owner), key: "k", body: `{"method":"page"}`,
				status: http.StatusNotFound, code: "order_not_found"},
			{name: "PaidOrder", sn: paidSN, auth: memberAuth(t, owner), key: "k", body: `{"method":"page"}`,
				status: http.StatusConflict, code: "order_not_payable"},
			{name: "ClosedOrder", sn: closedSN, auth: memberAuth(t, owner), key: "k", body: `{"method":"qr"}`,
				status: http.StatusConflict, code: "order_not_payable"},
			{name: "AlipayRefuses", sn: openSN, auth: memberAuth(t, owner), key: "k", body: `{"method":"qr"}`,
				fault:  func() { c.fake.FailNext(fakealipay.MethodPrecreate, "40004", "ACQ.INVALID_PARAMETER", 1) },
				status: http.StatusBadGateway, code: "alipay_refused"},
			{name: "AlipayUnavailable", sn: openSN, auth: memberAuth(t, owner), key: "k", body: `{"method":"qr"}`,
				fault:  func() { c.fake.FailNext(fakealipay.MethodPrecreate, "40004", "ACQ.SYSTEM_ERROR", 1) },
				status: http.StatusServiceUnavailable, code: "alipay_unavailable", retryAfter: true},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				if tc.fault != nil {
					tc.fault()
				}
				status, header, body := c.post(t, payPath(tc.sn), tc.auth, tc.key, tc.body)
				if status != tc.status || codeOf(t, body) != tc.code {
					t.Fatalf("%d %s, want %d %s", status, body, tc.status, tc.code)
				}
				if tc.retryAfter != (header.Get("Retry-After") != "") {
					t.Fatalf("Retry-After %q", header.Get("Retry-After"))
				}
			})
		}
		t.Run("RefusalsLeftTheOpenOrderUnstarted", func(t *testing.T) {
			// Only the precreate failures got as far as an attempt: one, no code.
			o := mustGetOrder(t, store, openSN)
			a, err := store.LatestAttempt(t.Context(), o.ID)
			if err != nil || a.AttemptNo != 1 || a.PayURL != "" {
				t.Fatalf("attempt %+v, %v; want attempt 1 without a code", a, err)
			}
			if v := c.mustPay(t, openSN, "qr", "k-after"); v.QRCode == "" {
				t.Fatalf("pay after the failures: %+v", v)
			}
		})
	})
}

// refundsPath is the admin refunds endpoint of an order.
func refundsPath(sn string) string { return "/admin/orders/" + sn + "/refunds" }

// POST /admin/orders/{sn}/refunds: an operator's refund is accepted (202)
// under its key, never past what was paid (422), and only with the admin
// token (401).
func TestAdminRefundAPI(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		c := newCashier(t, store)
		admin := "Bearer " + payAdminToken
		sn := "REFUND-1"
		mustOrder(t, store, sn, "100.00")
		c.mustPay(t, sn, "qr", "k-pay")
		if err := c.fake.Pay(t.Context(), sn); err != nil {
			t.Fatal(err)
		}
		unpaid := "REFUND-UNPAID"
		mustOrder(t, store, unpaid, "100.00")

		var first struct {
			OutRequestNo string `json:"out_request_no"`
			Kind         string `json:"kind"`
			Amount       string `json:"amount"`
			State        string `json:"state"`
		}
		t.Run("Accepted", func(t *testing.T) {
			status, _, body := c.post(t, refundsPath(sn), admin, "r-1", `{"amount":"30.00","reason":"damaged"}`)
			if status != http.StatusAccepted {
				t.Fatalf("%d %s, want 202", status, body)
			}
			if err := json.Unmarshal(body, &first); err != nil {
				t.Fatal(err)
			}
			if first.OutRequestNo == "" || first.Kind != string(model.RefundAfterSale) || first.Amount != "30.00" || first.State != string(model.RefundRefunding) {
				t.Fatalf("refund %s, want an AFTER_SALE refund of 30.00 in progress", body)
			}
		})
		t.Run("SameKeyAgain", func(t *testing.T) {
			status, _, body := c.post(t, refundsPath(sn), admin, "r-1", `{"amount":"30.00","reason":"damaged"}`)
			if status != http.StatusAccepted || !strings.Contains(string(body), first.OutRequestNo) {
				t.Fatalf("%d %s, want 202 with %s again", status, body, first.OutRequestNo)
			}
		})

		cases := []struct {
			name, sn, auth, key, body string
			status                    int
			code                      string
		}{
			{name: "TooLarge", sn: sn, auth: admin, key: "r-2", body: `{"amount":"70.01"}`,
				status: http.StatusUnprocessableEntity, code: "refund_too_large"},
			{name: "KeyReusedForAnotherAmount", sn: sn, auth: admin, key: "r-1", body: `{"amount":"31.00"}`,
				status: http.StatusUnprocessableEntity, code: "idempotency_key_reused"},
			{name: "NoToken", sn: sn, key: "r-3", body: `{"amount":"1.00"}`,
				status: http.StatusUnauthorized, code: "unauthorized"},
			{name: "MemberToken", sn: sn, auth: memberAuth(t, owner), key: "r-3", body: `{"amount":"1.00"}`,
				status: http.StatusUnauthorized, code: "unauthorized"},
			{name: "NoKey", sn: sn, auth: admin, body: `{"amount":"1.00"}`,
				status: http.StatusBadRequest, code: "invalid_request"},
			{name: "BadAmount", sn: sn, auth: admin, key: "r-3", body: `{"amount":"ten"}`,
				status: http.StatusBadRequest, code: "invalid_request"},
			{name: "UnpaidOrder", sn: unpaid, auth: admin, key: "r-3", body: `{"amount":"1.00"}`,
				status: http.StatusConflict, code: "nothing_to_refund"},
			{name: "UnknownOrder", sn: "REFUND-NOPE", auth: admin, key: "r-3", body: `{"amount":"1.00"}`,
				status: http.StatusNotFound, code: "order_not_found"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				status, _, body := c.post(t, refundsPath(tc.sn), tc.auth, tc.key, tc.body)
				if status != tc.status || codeOf(t, body) != tc.code {
					t.Fatalf("%d %s, want %d %s", status, body, tc.status, tc.code)
				}
			})
		}

		t.Run("ExactlyTheRest", func(t *testing.T) {
			status, _, body := c.post(t, refundsPath(sn), admin, "r-4", `{"amount":"70.00"}`)
			if status != http.StatusAccepted {
				t.Fatalf("%d %s, want 202", status, body)
			}
			o := mustGetOrder(t, store, sn)
			fs, err := store.RefundsByOrder(t.Context(), o.ID)
			if err != nil || len(fs) != 2 {
				t.Fatalf("refunds %+v, %v; want the two accepted", fs, err)
			}
		})
	})
}

// JSON answers are not HTML-escaped: a pay_url copied from curl's output
// opens in a browser, and an error message quotes the input as sent.
func TestJSONAnswersAreNotHTMLEscaped(t *testing.T) {
	store := daotest.Open(t, dao.DriverSQLite)
	c := newCashier(t, store)
	o := mustOrder(t, store, "PAY-AMP", "10.00")
	for _, tc := range []struct {
		name, path, auth, key, body string
		status                      int
		literal                     string
	}{
		{name: "PayURL", path: payPath(o.OrderSN), auth: memberAuth(t, owner), key: "k-amp", body: `{"method":"page"}`,
			status: http.StatusOK, literal: "&"},
		{name: "ErrorMessage", path: refundsPath(o.OrderSN), auth: "Bearer " + payAdminToken, key: "r-amp", body: `{"amount":"1&<2>"}`,
			status: http.StatusBadRequest, literal: `1&<2>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := c.post(t, tc.path, tc.auth, tc.key, tc.body)
			if status != tc.status {
				t.Fatalf("%d %s, want %d", status, body, tc.status)
			}
			if !strings.Contains(string(body), tc.literal) || strings.Contains(string(body), `\u00`) {
				t.Fatalf("answer %s: want %q literally, no \\u00XX escapes", body, tc.literal)
			}
		})
	}
}
