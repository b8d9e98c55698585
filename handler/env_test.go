package handler_test

import (
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/handler"
	"paynotify/internal/devkey"
	"paynotify/model"
	"paynotify/service"
)

// The merchant the handler under test is configured as.
const (
	appID    = "2021000000000001"
	sellerID = "2088000000000001"
)

const notifyPath = "/alipay/notify"

// server is the real HTTP surface over a real store, verifying with the
// dev stand-in for Alipay's public key.
type server struct {
	store   *dao.Store
	h       http.Handler
	signKey string // Alipay's (dev) private key: signs notifications
}

// newServer wires handler.New as serve does, over store.
func newServer(tb testing.TB, store *dao.Store) *server {
	tb.Helper()
	return newServerLogging(tb, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// newServerLogging is newServer logging to log.
func newServerLogging(tb testing.TB, store *dao.Store, log *slog.Logger) *server {
	tb.Helper()
	verifier, err := alipay.New(alipay.Config{
		AppID:           appID,
		SellerID:        sellerID,
		AppPrivateKey:   devkey.Read(tb, "app_private_key.pem"),
		AlipayPublicKey: devkey.Read(tb, "alipay_public_key.pem"),
	})
	if err != nil {
		tb.Fatalf("alipay.New: %v", err)
	}
	h := validated(tb, handler.New(handler.Deps{
		Log:      log,
		Verifier: verifier,
		Payments: service.NewPayments(store),
		DB:       store,
		Registry: prometheus.NewRegistry(),
	}))
	return &server{store: store, h: h, signKey: devkey.Read(tb, "alipay_private_key.pem")}
}

// paidForm is a TRADE_SUCCESS notification with the field set Alipay
// really sends (testdata/alipay-real-samples), before signing.
func paidForm(sn, tradeNo, amount string) url.Values {
	return url.Values{
		"app_id":           {appID},
		"auth_app_id":      {appID},
		"buyer_id":         {"2088102177846875"},
		"buyer_logon_id":   {"tes***@example.com"},
		"buyer_pay_amount": {amount},
		"charset":          {"utf-8"},
		"fund_bill_list":   {`[{"amount":"` + amount + `","fundChannel":"ALIPAYACCOUNT"}]`},
		"gmt_create":       {"2026-11-30 13:59:50"},
		"gmt_payment":      {"2026-11-30 14:00:05"},
		"invoice_amount":   {amount},
		"notify_id":        {"2026113000222140005012345678901234"},
		"notify_time":      {"2026-11-30 14:00:06"},
		"notify_type":      {"trade_status_sync"},
		"out_trade_no":     {sn},
		"point_amount":     {"0.00"},
		"receipt_amount":   {amount},
		"seller_email":     {"merchant@example.com"},
		"seller_id":        {sellerID},
		"subject":          {"paynotify test + 测试 - " + sn},
		"total_amount":     {amount},
		"trade_no":         {tradeNo},
		"trade_status":     {string(alipay.TradeSuccess)},
		"version":          {"1.0"},
	}
}

// gmtPaymentUTC is paidForm's gmt_payment (Beijing time) in UTC.
var gmtPaymentUTC = time.Date(2026, 11, 30, 6, 0, 5, 0, time.UTC)

// with returns a copy of form with the given key/value pairs set.
func with(form url.Values, kv ...string) url.Values {
	c := url.Values{}
	for k, vs := range form {
		c[k] = append([]string(nil), vs...)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Set(kv[i], kv[i+1])
	}
	return c
}

// sign returns form signed as Alipay signs a notification.
func (s *server) sign(tb testing.TB, form url.Values) url.Values {
	tb.Helper()
	signed, err := alipay.SignForm(s.signKey, form)
	if err != nil {
		tb.Fatalf("SignForm: %v", err)
	}
	return signed
}

// signedBody is form signed and URL-encoded, as Alipay POSTs it.
func (s *server) signedBody(tb testing.TB, form url.Values) string {
	tb.Helper()
	return s.sign(tb, form).Encode()
}

// do serves one request and returns the recorded response.
func (s *server) do(r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, r)
	return w
}

// notify POSTs body to the notify endpoint (with query appended to the URL
// if not empty) and returns the status and the answer.
func (s *server) notify(query, body string) (int, string) {
	target := notifyPath
	if query != "" {
		target += "?" + query
	}
	r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	w := s.do(r)
	return w.Code, w.Body.String()
}

// mustNotify POSTs body and fails the test unless Alipay is told want.
func (s *server) mustNotify(tb testing.TB, body, want string) {
	tb.Helper()
	if code, got := s.notify("", body); code != http.StatusOK || got != want {
		tb.Fatalf("notify: %d %q, want 200 %q", code, got, want)
	}
}

// mustOrder creates an order awaiting payment.
func mustOrder(tb testing.TB, store *dao.Store, sn, amount string) model.Order {
	tb.Helper()
	o, err := store.CreateOrder(tb.Context(), sn, 7, decimal.RequireFromString(amount))
	if err != nil {
		tb.Fatalf("create order %s: %v", sn, err)
	}
	return o
}

// mustGetOrder reads an order back.
func mustGetOrder(tb testing.TB, store *dao.Store, sn string) model.Order {
	tb.Helper()
	o, err := store.Order(tb.Context(), sn)
	if err != nil {
		tb.Fatalf("read order %s: %v", sn, err)
	}
	return o
}

// mustPayments lists an order's payments.
func mustPayments(tb testing.TB, store *dao.Store, orderID int64) []model.Payment {
	tb.Helper()
	ps, err := store.PaymentsByOrder(tb.Context(), orderID)
	if err != nil {
		tb.Fatalf("payments of order %d: %v", orderID, err)
	}
	return ps
}

// closeOrder closes an order of member 7's (mustOrder's) with the real
// cancel, Orders.Cancel.
func closeOrder(tb testing.TB, store *dao.Store, sn string) {
	tb.Helper()
	if _, err := service.NewOrders(store).Cancel(tb.Context(), 7, sn); err != nil {
		tb.Fatalf("cancel order %s: %v", sn, err)
	}
}

// snapshot renders every row of every table but goose's, so that two
// snapshots are equal exactly when nothing was written in between.
func snapshot(tb testing.TB, store *dao.Store) string {
	tb.Helper()
	listTables := "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
	if store.Driver() == dao.DriverMySQL {
		listTables = "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY table_name"
	}
	var b strings.Builder
	for _, table := range queryRows(tb, store.SQL(), listTables) {
		if table == "goose_db_version" {
			continue
		}
		fmt.Fprintf(&b, "%s:\n", table)
		rows := queryRows(tb, store.SQL(), "SELECT * FROM "+table)
		slices.Sort(rows)
		for _, r := range rows {
			fmt.Fprintf(&b, "  %s\n", r)
		}
	}
	return b.String()
}

// queryRows runs query and renders each row on one line, "column=value"
// separated by spaces.
func queryRows(tb testing.TB, db *sql.DB, query string) []string {
	tb.Helper()
	rows, err := db.QueryContext(tb.Context(), query)
	if err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		tb.Fatal(err)
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var out []string
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			tb.Fatalf("%s: %v", query, err)
		}
		var line strings.Builder
		for i, v := range vals {
			if len(cols) > 1 {
				fmt.Fprintf(&line, "%s=", cols[i])
			}
			switch v := v.(type) {
			case []byte:
				fmt.Fprintf(&line, "%s ", v)
			case time.Time:
				fmt.Fprintf(&line, "%s ", v.UTC().Format(time.RFC3339Nano))
			default:
				fmt.Fprintf(&line, "%v ", v)
			}
		}
		out = append(out, strings.TrimSpace(line.String()))
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	return out
}

// outcomes scrapes /metrics for paynotify_notifications_total by outcome.
func (s *server) outcomes(tb testing.TB) map[string]float64 {
	tb.Helper()
	w := s.do(httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != http.StatusOK {
		tb.Fatalf("GET /metrics: %d", w.Code)
	}
	const prefix = `paynotify_notifications_total{outcome="`
	counts := map[string]float64{}
	for line := range strings.Lines(w.Body.String()) {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		label, value, ok := strings.Cut(rest, `",provider="alipay"} `)
		if !ok {
			tb.Fatalf("unexpected metrics line %q", line)
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			tb.Fatalf("metrics line %q: %v", line, err)
		}
		counts[label] = n
	}
	return counts
}

// checkCounted asserts that exactly one notification was counted since
// before, under outcome.
func (s *server) checkCounted(tb testing.TB, before map[string]float64, outcome string) {
	tb.Helper()
	after := s.outcomes(tb)
	for label, n := range after {
		want := before[label]
		if label == outcome {
			want++
		}
		if n != want {
			tb.Errorf("paynotify_notifications_total{outcome=%q} went %v → %v; want one notification counted as %q",
				label, before[label], n, outcome)
		}
	}
	if _, ok := after[outcome]; !ok {
		tb.Errorf("no notification counted as %q: %v", outcome, after)
	}
}
