package model

import (
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

func TestValidID(t *testing.T) {
	for _, c := range []struct {
		id   string
		want bool
	}{
		{"DEMO-1001", true}, {"DEMO-1001-2", true}, {"RP-2026113022001", true}, {strings.Repeat("x", 128), true},
		{"", false}, {strings.Repeat("x", 129), false}, {"🙂", false}, {"订单1", false}, {"A B", false},
		{"a\x00b", false}, {"a&b", false}, {"a=b", false}, {"a\tb", false}, {"a\x7f", false},
	} {
		if got := ValidID(c.id); got != c.want {
			t.Errorf("ValidID(%q) = %v, want %v", c.id, got, c.want)
		}
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
