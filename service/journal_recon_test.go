package service

import (
	"testing"
	"time"

	"paynotify/model"
)

// The journal lines of reconciliation's events and of payments without an
// order: balanced, on the accounts docs/events.md names.
func TestJournalLinesOfReconciliation(t *testing.T) {
	at := time.Date(2026, 12, 1, 1, 30, 0, 0, time.UTC)
	mk := func(typ model.EventType, data any) model.Event {
		t.Helper()
		ev, err := newEvent(typ, 0, data, at)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	for _, c := range []struct {
		name          string
		ev            model.Event
		debit, credit string
		amount        string
	}{
		{"Unmatched", mk(model.EventPaymentUnmatched, model.PaymentEventData{TradeNo: "T1", Amount: "12.34", State: "UNMATCHED"}),
			model.AccountAlipayClearing, model.AccountRefundsPayable, "12.34"},
		{"FeesCharged", mk(model.EventFeesBooked, model.FeeEventData{BillDate: "2026-11-30", Lines: 3, Amount: "0.59"}),
			model.AccountFeeExpense, model.AccountAlipayClearing, "0.59"},
		{"FeesGivenBack", mk(model.EventFeesBooked, model.FeeEventData{BillDate: "2026-11-30", Lines: 1, Amount: "-0.18"}),
			model.AccountAlipayClearing, model.AccountFeeExpense, "0.18"},
		{"ConsoleRefundOfASale", mk(model.EventRefunded, model.RefundEventData{OrderID: 7, Kind: "CONSOLE", Amount: "30.00"}),
			model.AccountSalesReturns, model.AccountAlipayClearing, "30.00"},
		{"ConsoleRefundWithoutOrder", mk(model.EventRefunded, model.RefundEventData{Kind: "CONSOLE", Amount: "15.00"}),
			model.AccountRefundsPayable, model.AccountAlipayClearing, "15.00"},
		// Each provider holds its own money: WeChat Pay's on its own account.
		{"WechatpayPaid", mk(model.EventOrderPaid, model.PaymentEventData{OrderID: 8, Provider: "wechatpay", TradeNo: "4200", Amount: "10.00", State: "APPLIED"}),
			model.AccountWechatpayClearing, model.AccountSales, "10.00"},
		{"WechatpayOwedBack", mk(model.EventRefundPending, model.PaymentEventData{OrderID: 8, Provider: "wechatpay", TradeNo: "4201", Amount: "10.00", State: "REFUND_PENDING"}),
			model.AccountWechatpayClearing, model.AccountRefundsPayable, "10.00"},
		{"WechatpayRefunded", mk(model.EventRefunded, model.RefundEventData{OrderID: 8, Provider: "wechatpay", Kind: "AUTO", Amount: "10.00"}),
			model.AccountRefundsPayable, model.AccountWechatpayClearing, "10.00"},
		{"WechatpayFees", mk(model.EventFeesBooked, model.FeeEventData{Provider: "wechatpay", BillDate: "2026-11-30", Lines: 3, Amount: "0.06"}),
			model.AccountFeeExpense, model.AccountWechatpayClearing, "0.06"},
		{"WechatpayFeesGivenBack", mk(model.EventFeesBooked, model.FeeEventData{Provider: "wechatpay", BillDate: "2026-11-30", Lines: 1, Amount: "-0.18"}),
			model.AccountWechatpayClearing, model.AccountFeeExpense, "0.18"},
		{"AlipayNamed", mk(model.EventOrderPaid, model.PaymentEventData{OrderID: 9, Provider: "alipay", TradeNo: "T9", Amount: "1.00", State: "APPLIED"}),
			model.AccountAlipayClearing, model.AccountSales, "1.00"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lines, err := (&Accounting{}).journalLines(c.ev)
			if err != nil || len(lines) != 2 {
				t.Fatalf("lines %+v, %v", lines, err)
			}
			d, k := lines[0], lines[1]
			if d.Account != c.debit || k.Account != c.credit || d.Debit.StringFixed(2) != c.amount || k.Credit.StringFixed(2) != c.amount ||
				!d.Credit.IsZero() || !k.Debit.IsZero() {
				t.Fatalf("lines %+v, want debit %s / credit %s %s", lines, c.debit, c.credit, c.amount)
			}
		})
	}
}
