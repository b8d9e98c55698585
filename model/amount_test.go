package model_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/model"
)

// One amount rule for every way money enters: an amount past
// model.MaxAmount is refused as a notification's or query's (Observation),
// a bill line's (BillEntry), a refund's or an Alipay form's (ParseAmount),
// and the most one payment may be is taken by each.
func TestAmountBound(t *testing.T) {
	at := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		amount string
		ok     bool
	}{
		{"0.01", true}, {"100000000.00", true}, {"100000000.01", false},
		{"10000000000.00", false}, {"92233720368547758.07", false}, {"0", false}, {"1.001", false},
	} {
		d := decimal.RequireFromString(c.amount)
		obs := model.Observation{Provider: model.ProviderWechatpay, TradeNo: "4200", OutTradeNo: "WX-1", Amount: d}
		if err := obs.Check(); (err == nil) != c.ok || (err != nil && !errors.Is(err, model.ErrInvalidNotification)) {
			t.Errorf("observation of %s: %v", c.amount, err)
		}
		pay := model.BillEntry{Line: 7, Kind: model.BillPayment, TradeNo: "4200", OutTradeNo: "WX-1", Amount: d, Received: d, FinishedAt: at}
		if err := pay.Check(); (err == nil) != c.ok || (err != nil && !errors.Is(err, model.ErrBadBill)) {
			t.Errorf("bill payment of %s: %v", c.amount, err)
		}
		refund := model.BillEntry{Line: 8, Kind: model.BillRefund, TradeNo: "4200", OutTradeNo: "WX-1", OutRequestNo: "RF-1",
			Amount: d.Neg(), Received: d.Neg(), FinishedAt: at}
		if err := refund.Check(); (err == nil) != c.ok {
			t.Errorf("bill refund of %s: %v", c.amount, err)
		}
		if _, err := model.ParseAmount(c.amount); (err == nil) != c.ok {
			t.Errorf("ParseAmount(%s): %v", c.amount, err)
		}
	}
}

// A bill line is held to the rules a notification is, whoever read it.
func TestBillEntryCheck(t *testing.T) {
	at := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	one := decimal.RequireFromString("1.00")
	good := model.BillEntry{Line: 3, Kind: model.BillPayment, TradeNo: "4200002026113000000000000001", OutTradeNo: "W-1",
		Amount: one, Received: one, FinishedAt: at}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*model.BillEntry){
		"OutTradeNoSpace":     func(e *model.BillEntry) { e.OutTradeNo = "W2 X" },
		"OutTradeNoSlash":     func(e *model.BillEntry) { e.OutTradeNo = "W2/X" },
		"OutTradeNoAmpersand": func(e *model.BillEntry) { e.OutTradeNo = "W1&X" },
		"OutTradeNo65":        func(e *model.BillEntry) { e.OutTradeNo = strings.Repeat("W", 65) },
		"TradeNoSpace":        func(e *model.BillEntry) { e.TradeNo = "4200 1" },
		"TradeNo129":          func(e *model.BillEntry) { e.TradeNo = strings.Repeat("4", 129) },
		"RefundNoRequestNo":   func(e *model.BillEntry) { e.Kind, e.Amount, e.Received = model.BillRefund, one.Neg(), one.Neg() },
		"NegativePayment":     func(e *model.BillEntry) { e.Amount = one.Neg() },
		"ReceivedOverBound":   func(e *model.BillEntry) { e.Received = model.MaxAmount.Add(one) },
		"FeeOverBound":        func(e *model.BillEntry) { e.Fee = model.MaxAmount.Add(one).Neg() },
		"NoTime":              func(e *model.BillEntry) { e.FinishedAt = time.Time{} },
		"Kind":                func(e *model.BillEntry) { e.Kind = "OTHER" },
	} {
		e := good
		edit(&e)
		if err := e.Check(); !errors.Is(err, model.ErrBadBill) || !strings.Contains(err.Error(), "line 3") {
			t.Errorf("%s: %v, want bad bill at line 3", name, err)
		}
	}
}

// TestAmountPattern: the console's pattern (anchored whole, as a browser
// anchors it) accepts exactly what ParseAmount reads, zero aside.
func TestAmountPattern(t *testing.T) {
	re := regexp.MustCompile(`^(?:` + model.AmountPattern + `)$`)
	for _, s := range []string{"10", "10.5", "10.50", "0.50", "0", "0.00", " 10", "10 ", "0001.00", "01", "1.005", "1e1", "-1", "+1", ".5", "5.",
		"1,00", "１０", "1234567890123456", "12345678901234567", "10.5.0", ""} {
		_, err := model.ParseAmount(s)
		parses := err == nil || strings.Contains(err.Error(), "not positive") || strings.Contains(err.Error(), "is over")
		if got := re.MatchString(s); got != parses {
			t.Errorf("%q: pattern %v, ParseAmount %v", s, got, err)
		}
	}
}
