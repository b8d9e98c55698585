package model

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

func form(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func paying(extra ...string) func(string) string {
	base := []string{"notify_id", "n1", "trade_status", "TRADE_SUCCESS", "out_trade_no", "SN-1",
		"trade_no", "2026113022001", "total_amount", "100.00", "gmt_payment", "2026-11-30 14:05:02"}
	return form(append(base, extra...)...)
}

func TestParseNotification(t *testing.T) {
	t.Run("Paying", func(t *testing.T) {
		n, err := ParseNotification(paying())
		if err != nil {
			t.Fatal(err)
		}
		want := time.Date(2026, 11, 30, 6, 5, 2, 0, time.UTC) // Beijing 14:05:02
		if n.OutTradeNo != "SN-1" || n.TradeNo != "2026113022001" || !n.TotalAmount.Equal(decimal.RequireFromString("100")) ||
			n.GmtPayment == nil || !n.GmtPayment.Equal(want) || n.IsRefund() {
			t.Fatalf("parsed %+v", n)
		}
	})
	t.Run("OtherStatusesAreNotValidated", func(t *testing.T) {
		for _, st := range []string{"WAIT_BUYER_PAY", "TRADE_CLOSED", ""} {
			n, err := ParseNotification(form("trade_status", st, "total_amount", "garbage"))
			if err != nil || n.TradeStatus.Paid() {
				t.Fatalf("%q: %+v %v", st, n, err)
			}
		}
	})
	t.Run("RefundIsNotAPayment", func(t *testing.T) {
		for _, extra := range [][]string{{"refund_fee", "10.00"}, {"out_biz_no", "RP-1"}, {"gmt_refund", "2026-11-30 15:00:00.123"}} {
			n, err := ParseNotification(paying(extra...))
			if err != nil || !n.IsRefund() || n.TradeNo != "" {
				t.Fatalf("%v: %+v %v; want a refund, not parsed as a payment", extra, n, err)
			}
		}
	})
	bad := []struct {
		name string
		kv   []string
	}{
		{"ZeroAmount", []string{"total_amount", "0"}},
		{"NegativeAmount", []string{"total_amount", "-1"}},
		{"ThreeDecimals", []string{"total_amount", "1.001"}},
		{"Exponent", []string{"total_amount", "1e3"}},
		{"NotANumber", []string{"total_amount", "abc"}},
		{"TooLarge", []string{"total_amount", "12345678901234567.00"}},
		{"EmptyTradeNo", []string{"trade_no", ""}},
		{"LongTradeNo", []string{"trade_no", strings.Repeat("7", 129)}},
		{"SpaceInOutTradeNo", []string{"out_trade_no", "A B"}},
		{"NonASCIIOutTradeNo", []string{"out_trade_no", "订单"}},
		{"GluedFieldInOutTradeNo", []string{"out_trade_no", "SN-1&point_amount=0.00"}},
		{"GluedFieldInTradeNo", []string{"trade_no", "2026113022001&trade_status=TRADE_SUCCESS"}},
		{"BadPaymentTime", []string{"gmt_payment", "yesterday"}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ParseNotification(paying(c.kv...)); !errors.Is(err, ErrInvalidNotification) {
				t.Fatalf("err = %v, want ErrInvalidNotification", err)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	amount := decimal.RequireFromString("100.00")
	cases := []struct {
		name       string
		status     OrderStatus
		paid       string
		wantState  PaymentState
		wantReason RefundReason
	}{
		{"AwaitingExactAmountApplies", OrderAwaitingPayment, "100", PaymentApplied, RefundNone},
		{"AwaitingOtherAmount", OrderAwaitingPayment, "0.01", PaymentRefundPending, RefundAmountMismatch},
		{"Closed", OrderClosed, "100.00", PaymentRefundPending, RefundOrderClosed},
		{"Invalid", OrderInvalid, "100.00", PaymentRefundPending, RefundOrderClosed},
		{"AlreadyPaid", OrderPaid, "100.00", PaymentRefundPending, RefundAlreadyPaid},
		{"Shipped", OrderShipped, "100.00", PaymentRefundPending, RefundAlreadyPaid},
		{"Completed", OrderCompleted, "100.00", PaymentRefundPending, RefundAlreadyPaid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			state, reason := Decide(Order{Status: c.status, PayAmount: amount}, decimal.RequireFromString(c.paid))
			if state != c.wantState || reason != c.wantReason {
				t.Fatalf("Decide = %s %q, want %s %q", state, reason, c.wantState, c.wantReason)
			}
		})
	}
}

func TestReservationRoundTrip(t *testing.T) {
	items := []OrderItem{{SKUID: 3, Quantity: 2}, {SKUID: 17, Quantity: 1}}
	s := FormatReservation(items)
	got, err := ParseReservation(s)
	if err != nil || len(got) != 2 || got[0] != (ItemRequest{3, 2}) || got[1] != (ItemRequest{17, 1}) {
		t.Fatalf("%q → %+v, %v", s, got, err)
	}
	if r, err := ParseReservation(""); err != nil || r != nil {
		t.Fatalf("empty: %v %v", r, err)
	}
	for _, bad := range []string{"3", "3:0", "x:1", "3:2,", "-1:2"} {
		if _, err := ParseReservation(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
