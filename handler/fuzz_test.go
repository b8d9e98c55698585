package handler_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
)

// ledgerKey is what a payment row says about money: which trade paid how
// much for which order.
type ledgerKey struct{ tradeNo, outTradeNo, amount string }

// FuzzNotify posts arbitrary bodies to the notify endpoint. Whatever the
// body, the answer is 200 with exactly "success" or "failure", and nothing
// but genuinely signed content reaches the ledger: every payment row is one
// of the seed notifications, trade, order and amount alike. An order is
// paid exactly when it holds one APPLIED payment.
func FuzzNotify(f *testing.F) {
	store := daotest.Open(f, dao.DriverSQLite)
	s := newServer(f, store)
	for sn, amount := range map[string]string{"F-1": "100.00", "F-2": "0.01", "F-3": "50.00", "F-4": "100.00"} {
		mustOrder(f, store, sn, amount)
	}
	closeOrder(f, store, "F-3")

	seeds := []url.Values{
		paidForm("F-1", "T-F-1", "100.00"),
		with(paidForm("F-1", "T-F-1", "100.00"), "trade_status", "TRADE_FINISHED",
			"notify_id", "2026120100222140005099999999999999", "gmt_close", "2026-12-01 14:00:05"),
		paidForm("F-1", "T-F-1-second", "100.00"), // paid already: refund pending
		paidForm("F-2", "T-F-2", "0.01"),
		paidForm("F-3", "T-F-3", "50.00"), // closed: refund pending
		paidForm("F-4", "T-F-4", "0.01"),  // underpaid: refund pending
		with(paidForm("F-4", "T-F-4-wait", "100.00"), "trade_status", "WAIT_BUYER_PAY", "gmt_payment", ""),
		paidForm("F-9", "T-F-9", "100.00"), // no such order
	}
	genuine := map[ledgerKey]bool{}
	var bodies []string
	for _, form := range seeds {
		if alipay.TradeStatus(form.Get("trade_status")).Paid() {
			genuine[ledgerKey{form.Get("trade_no"), form.Get("out_trade_no"), form.Get("total_amount")}] = true
		}
		body := s.signedBody(f, form)
		bodies = append(bodies, body)
		f.Add([]byte(body))
	}
	valid := bodies[0]
	for _, edge := range []string{
		"",
		"=",
		"&&&",
		"sign=&sign_type=RSA2",
		"%zz",
		"a=1;b=2",
		valid + "&total_amount=0.01",   // repeated key
		valid + "&refund_fee=",         // empty value: still genuine
		valid + "&=x",                  // empty key: not signed, not read
		valid + "&alipay_cert_sn=ffff", // not signed, not read
		strings.Replace(valid, "total_amount=100.00", "total_amount=1.00", 1),        // tampered
		strings.Replace(valid, "out_trade_no=F-1", "out_trade_no=F-4", 1),            // tampered
		strings.Replace(valid, "trade_no=T-F-1", "trade_no=T-F-1%00", 1),             // NUL
		strings.Replace(valid, "sign_type=RSA2", "sign_type=RSA2&sign_type=RSA2", 1), // repeated sign_type
		valid + "&" + strings.Repeat("x", 64<<10),                                    // over the cap
	} {
		f.Add([]byte(edge))
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		code, answer := s.notify("", string(body))
		// 413: a body over the cap, answered "failure" all the same.
		if (code != http.StatusOK && code != http.StatusRequestEntityTooLarge) || (answer != "success" && answer != "failure") {
			t.Fatalf("answer %d %q, want 200 (or 413) success or failure", code, answer)
		}
		checkLedger(t, store, genuine)
	})
}

// checkLedger asserts that every payment is one genuine is made of, and
// that an order is paid exactly when it holds one APPLIED payment.
func checkLedger(t *testing.T, store *dao.Store, genuine map[ledgerKey]bool) {
	t.Helper()
	rows, err := store.SQL().QueryContext(t.Context(), "SELECT trade_no, out_trade_no, amount FROM oms_order_payment")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k ledgerKey
		if err := rows.Scan(&k.tradeNo, &k.outTradeNo, &k.amount); err != nil {
			t.Fatal(err)
		}
		d, err := decimal.NewFromString(k.amount)
		if err != nil {
			t.Fatalf("ledger amount %q: %v", k.amount, err)
		}
		k.amount = d.StringFixed(2)
		if !genuine[k] {
			t.Fatalf("ledger holds a payment no genuine notification made: %+v", k)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	rows, err = store.SQL().QueryContext(t.Context(),
		`SELECT o.order_sn, o.status, (SELECT COUNT(*) FROM oms_order_payment p WHERE p.order_id = o.id AND p.state = ?)
		   FROM oms_order o`, model.PaymentApplied)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			sn      string
			status  model.OrderStatus
			applied int
		)
		if err := rows.Scan(&sn, &status, &applied); err != nil {
			t.Fatal(err)
		}
		if applied > 1 || (status == model.OrderPaid) != (applied == 1) {
			t.Fatalf("order %s: status %d with %d APPLIED payments", sn, status, applied)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}
