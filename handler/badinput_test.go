package handler_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/handler"
	"paynotify/internal/devkey"
	"paynotify/model"
	"paynotify/service"
)

// logBuffer collects a handler's log lines, safe for concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// checkNoError fails if anything was logged at ERROR: a database error
// is logged so, and bad input must never get that far.
func (l *logBuffer) checkNoError(t *testing.T) {
	t.Helper()
	for line := range strings.Lines(l.String()) {
		if strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, "collation") {
			t.Errorf("logged: %s", line)
		}
	}
}

// edge is every route that takes an order_sn, over a real store, logging
// into logs. Nothing it is asked reaches Alipay, which is nowhere.
func newEdge(t *testing.T, store *dao.Store, logs io.Writer) http.Handler {
	t.Helper()
	client, err := alipay.New(alipay.Config{
		AppID: appID, SellerID: sellerID,
		AppPrivateKey:   devkey.Read(t, "app_private_key.pem"),
		AlipayPublicKey: devkey.Read(t, "alipay_public_key.pem"),
		SandboxGateway:  "http://127.0.0.1:1/gateway.do",
	})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	payments := service.NewPayments(store)
	return handler.New(handler.Deps{
		Log:        log,
		Verifier:   client,
		Payments:   payments,
		Orders:     service.NewOrders(store),
		JWTSecret:  jwtSecret,
		AdminToken: payAdminToken,
		Dashboard:  service.NewDashboard(store), Queues: service.NewQueues(store), Lookup: service.NewLookup(store),
		Checkout: service.NewCheckout(store, alipayOnly(client), payments, nil, log),
		Refunds:  service.NewRefunds(store, alipayOnly(client), log),
		DB:       store,
		Registry: prometheus.NewRegistry(),
	})
}

// An order_sn that cannot name an order — not ASCII, too long, a space —
// is answered 404 on every route that takes one, at the edge: no query
// runs, so MySQL never answers "Illegal mix of collations" (a 500 before).
func TestForeignOrderSNIsNotFound(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		var logs logBuffer
		h := newEdge(t, store, &logs)
		mustOrder(t, store, "EDGE-1", "10.00")
		was := snapshot(t, store)
		var queried []string
		var asking bool
		if err := store.Trace(func(sql string) {
			if asking {
				queried = append(queried, sql)
			}
		}); err != nil {
			t.Fatal(err)
		}
		member, admin := memberAuth(t, owner), "Bearer "+payAdminToken
		for _, sn := range []string{"🙂", "订单1", "EDGE-1🙂", "EDGE 1", strings.Repeat("9", 129)} {
			p := url.PathEscape(sn)
			for _, r := range []struct{ method, path, auth, body string }{
				{http.MethodGet, "/api/v1/orders/" + p, member, ""},
				{http.MethodPost, "/api/v1/orders/" + p + "/cancel", member, ""},
				{http.MethodPost, "/api/v1/orders/" + p + "/pay", member, `{"method":"page"}`},
				{http.MethodGet, "/admin/orders/" + p + "/refunds", admin, ""},
				{http.MethodPost, "/admin/orders/" + p + "/refunds", admin, `{"amount":"1.00","reason":"returned"}`},
			} {
				req := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
				req.Header.Set("Authorization", r.auth)
				req.Header.Set("Idempotency-Key", "edge-1")
				w := httptest.NewRecorder()
				asking, queried = true, nil
				h.ServeHTTP(w, req)
				asking = false
				if w.Code != http.StatusNotFound || codeOf(t, w.Body.Bytes()) != "order_not_found" {
					t.Errorf("%s %s: %d %s, want 404 order_not_found", r.method, r.path, w.Code, w.Body)
				}
				if len(queried) > 0 {
					t.Errorf("%s %s reached the database: %q", r.method, r.path, queried)
				}
			}
		}
		logs.checkNoError(t)
		if now := snapshot(t, store); now != was {
			t.Fatalf("bad input changed the database:\nbefore:\n%s\nafter:\n%s", was, now)
		}
	})
}

// A refund notification whose out_biz_no is no identifier of ours is
// answered success (the refund worker confirms refunds by query) without
// touching the database; before, MySQL refused the lookup and Alipay was
// told "failure" on every resend.
func TestRefundNoticeWithForeignOutBizNo(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		var logs logBuffer
		h := newEdge(t, store, &logs)
		s := &server{store: store, h: h, signKey: devkey.Read(t, "alipay_private_key.pem")}
		mustOrder(t, store, "EDGE-2", "10.00")
		was := snapshot(t, store)
		form := with(paidForm("EDGE-2", "T-EDGE-2", "10.00"),
			"trade_status", string(alipay.TradeClosed), "out_biz_no", "退款🙂", "refund_fee", "10.00", "gmt_refund", "2026-11-30 15:00:00.123")
		s.mustNotify(t, s.signedBody(t, form), "success")
		logs.checkNoError(t)
		if !strings.Contains(logs.String(), "out_biz_no") {
			t.Errorf("no warning names the unusable out_biz_no:\n%s", logs.String())
		}
		if now := snapshot(t, store); now != was {
			t.Fatalf("the notice changed the database:\nbefore:\n%s\nafter:\n%s", was, now)
		}
	})
}

// A field Alipay signs but we keep only for reference never stops a
// payment: an unusable notify_id is stored empty, an impossible
// gmt_payment gives way to the time the payment was seen, each with a
// warning. Before, MySQL refused the row on every resend (notify_id too
// long or not ASCII, year 0001), or stored year 9999.
func TestNotifyUnusableReferenceFieldsStillApply(t *testing.T) {
	cases := []struct {
		name, field, value string
	}{
		{"NotifyID300Chars", "notify_id", strings.Repeat("a", 300)},
		{"NotifyIDNotASCII", "notify_id", "通知-🙂-2026113000222140005012345678901234"},
		{"GmtPaymentYear1", "gmt_payment", "0001-01-01 00:00:00"},
		{"GmtPaymentYear9999", "gmt_payment", "9999-12-31 23:59:59"},
		{"GmtPaymentUnreadable", "gmt_payment", "2026-11-30T14:00:05+08:00"},
	}
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		var logs logBuffer
		s := &server{store: store, h: newEdge(t, store, &logs), signKey: devkey.Read(t, "alipay_private_key.pem")}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				sn := "REF-" + c.name
				mustOrder(t, store, sn, "100.00")
				form := with(paidForm(sn, "T-"+sn, "100.00"), c.field, c.value)
				seen := time.Now()
				s.mustNotify(t, s.signedBody(t, form), "success")
				s.mustNotify(t, s.signedBody(t, form), "success") // Alipay's resend: a duplicate
				o, p := mustGetOrder(t, store, sn), mustPayment(t, store, "T-"+sn)
				if o.Status != model.OrderPaid || p.State != model.PaymentApplied {
					t.Fatalf("order status %d, payment %s: want paid, APPLIED", o.Status, p.State)
				}
				wantID := paidForm(sn, "", "").Get("notify_id")
				if c.field == "notify_id" {
					wantID = ""
				}
				if p.NotifyID != wantID {
					t.Errorf("notify_id stored %q, want %q", p.NotifyID, wantID)
				}
				if c.field == "gmt_payment" {
					// DATETIME keeps whole seconds (MySQL rounds them).
					lo, hi := seen.Add(-time.Second), time.Now().Add(time.Second)
					for _, at := range []*time.Time{o.PaymentTime, p.PaidAt} {
						if at == nil || at.Before(lo) || at.After(hi) {
							t.Errorf("payment time %v, want when it was seen (%v)", at, seen.UTC())
						}
					}
				} else if o.PaymentTime == nil || !o.PaymentTime.Equal(gmtPaymentUTC) {
					t.Errorf("payment_time %v, want gmt_payment %v", o.PaymentTime, gmtPaymentUTC)
				}
			})
		}
		logs.checkNoError(t)
		if n := strings.Count(logs.String(), "notification field dropped"); n != 2*len(cases) {
			t.Errorf("%d warnings for a dropped field, want one per notification (%d)", n, 2*len(cases))
		}
	})
}
