package alipay

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/shopspring/decimal"

	"paynotify/model"
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
		want := time.Date(2026, 11, 30, 6, 5, 2, 0, time.UTC) // model.Beijing 14:05:02
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
		{"NonASCIITradeNo", []string{"trade_no", "2026113022001🙂"}},
		{"LongOutTradeNo", []string{"out_trade_no", strings.Repeat("S", 65)}},
		{"SpaceInOutTradeNo", []string{"out_trade_no", "A B"}},
		{"NonASCIIOutTradeNo", []string{"out_trade_no", "订单"}},
		{"GluedFieldInOutTradeNo", []string{"out_trade_no", "SN-1&point_amount=0.00"}},
		{"GluedFieldInTradeNo", []string{"trade_no", "2026113022001&trade_status=TRADE_SUCCESS"}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ParseNotification(paying(c.kv...)); !errors.Is(err, model.ErrInvalidNotification) {
				t.Fatalf("err = %v, want model.ErrInvalidNotification", err)
			}
		})
	}
}

// Fields kept only for reference never refuse a payment: an unusable one
// is left out, with a reason, and the rest parses as before.
func TestParseNotificationDropsReferenceFields(t *testing.T) {
	cases := []struct {
		name string
		kv   []string
		// notifyID and paidAt are what must be kept ("" / zero: nothing).
		notifyID string
		paidAt   time.Time
	}{
		{"NotifyID128Kept", []string{"notify_id", strings.Repeat("a", 128)}, strings.Repeat("a", 128), paidAt},
		{"NotifyID129Dropped", []string{"notify_id", strings.Repeat("a", 129)}, "", paidAt},
		{"NotifyIDNonASCIIDropped", []string{"notify_id", "通知-1"}, "", paidAt},
		{"NotifyIDWithSpaceDropped", []string{"notify_id", "n 1"}, "", paidAt},
		{"PaymentTimeUnreadable", []string{"gmt_payment", "yesterday"}, "n1", time.Time{}},
		{"PaymentTimeYear1", []string{"gmt_payment", "0001-01-01 00:00:00"}, "n1", time.Time{}},
		{"PaymentTimeBeforeAlipay", []string{"gmt_payment", "2003-12-31 23:59:59"}, "n1", time.Time{}},
		{"PaymentTimeYear9999", []string{"gmt_payment", "9999-12-31 23:59:59"}, "n1", time.Time{}},
		{"PaymentTimeTwoDaysAhead", []string{"gmt_payment", FormatTime(time.Now().Add(48 * time.Hour))}, "n1", time.Time{}},
		{"PaymentTimeFirstDay", []string{"gmt_payment", "2004-01-01 00:00:00"}, "n1", time.Date(2003, 12, 31, 16, 0, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := ParseNotification(paying(c.kv...))
			if err != nil {
				t.Fatalf("refused: %v; a reference field must not refuse a payment", err)
			}
			if n.TradeNo != "2026113022001" || n.OutTradeNo != "SN-1" || !n.TotalAmount.Equal(decimal.RequireFromString("100")) {
				t.Fatalf("deciding fields lost: %+v", n)
			}
			if n.NotifyID != c.notifyID {
				t.Errorf("notify_id = %q, want %q", n.NotifyID, c.notifyID)
			}
			switch {
			case c.paidAt.IsZero() && n.GmtPayment != nil:
				t.Errorf("gmt_payment kept as %v", n.GmtPayment)
			case !c.paidAt.IsZero() && (n.GmtPayment == nil || !n.GmtPayment.Equal(c.paidAt)):
				t.Errorf("gmt_payment = %v, want %v", n.GmtPayment, c.paidAt)
			}
			kept := n.NotifyID == c.kv[1] || (n.GmtPayment != nil && c.kv[0] == "gmt_payment")
			if kept != (len(n.Dropped) == 0) {
				t.Errorf("Dropped = %q, want a reason exactly when %s is left out", n.Dropped, c.kv[0])
			}
			for _, d := range n.Dropped {
				if !strings.HasPrefix(d, c.kv[0]+" ") || !utf8.ValidString(d) {
					t.Errorf("reason %q does not name %s (or is not UTF-8)", d, c.kv[0])
				}
			}
		})
	}
	t.Run("RefundWithForeignOutBizNo", func(t *testing.T) {
		n, err := ParseNotification(form("trade_status", "TRADE_CLOSED", "out_biz_no", "退款🙂", "notify_id", "n1"))
		if err != nil || !n.IsRefund() || len(n.Dropped) != 1 || !strings.HasPrefix(n.Dropped[0], "out_biz_no ") {
			t.Fatalf("%+v %v: want a refund notice, its out_biz_no named in Dropped", n, err)
		}
	})
	t.Run("LongValueClippedOnACharacter", func(t *testing.T) {
		n, _ := ParseNotification(paying("notify_id", strings.Repeat("通", 100)))
		if len(n.Dropped) != 1 || !utf8.ValidString(n.Dropped[0]) || len(n.Dropped[0]) > 200 {
			t.Fatalf("Dropped = %q: want one short, valid UTF-8 reason", n.Dropped)
		}
	})
}

// paidAt is paying's gmt_payment, Beijing 14:05:02, in UTC.
var paidAt = time.Date(2026, 11, 30, 6, 5, 2, 0, time.UTC)
